// `radixserve generate`: one prompt in, one JSON object out ({"output_ids": [...], ...}); no server. The request runs
// through serve's engine and scheduler on this thread (serving::Driver); with --speculative-algorithm the JSON adds
// the acceptance figures.
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <sstream>

#include "apps/radixserve/cli_checks.h"
#include "apps/radixserve/commands.h"
#include "apps/radixserve/model_option.h"
#include "apps/radixserve/scheduler_options.h"
#include "serving/driver.h"
#include "tokenizer/tokenizer.h"

namespace rs::app {
namespace {

struct GenerateOptions {
  std::string model_dir;
  std::optional<std::string> prompt_ids;
  std::optional<std::string> prompt;  // given, perhaps empty
  int32_t max_new_tokens = 32;
  int32_t prefill_chunk = 2048;
  bool ignore_eos = false;
  engine::SamplingParams sampling{.temperature = 0.0f};
  int64_t seed = -1;
  engine::EngineConfig engine;
  spec::SpeculativeConfig speculative;
};

std::vector<int32_t> parse_ids(const std::string& text) {
  std::vector<int32_t> ids;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    try {
      size_t used = 0;
      ids.push_back(std::stoi(item, &used));
      RS_CHECK(used == item.size() || item.find_first_not_of(" ", used) == std::string::npos, "");
    } catch (const std::exception&) {
      RS_FAIL("--prompt-ids: '{}' is not a token id", item);
    }
  }
  RS_CHECK(!ids.empty(), "--prompt-ids is empty");
  return ids;
}

// The result JSON's "speculative" object: totals, acceptance rate and mean tokens per verify pass.
nlohmann::json speculative_json(const spec::SpeculativeConfig& config, const spec::SpecTotals& totals) {
  return {{"algorithm", spec::spec_algorithm_name(config.algorithm)},
          {"num_draft_tokens", config.num_draft_tokens},
          {"verify_steps", totals.verifies},
          {"draft_tokens", totals.drafted},
          {"accepted_tokens", totals.accepted},
          {"acceptance_rate", totals.drafted > 0 ? static_cast<double>(totals.accepted) / totals.drafted : 0.0},
          {"accept_length", totals.verifies > 0 ? 1.0 + static_cast<double>(totals.accepted) / totals.verifies : 0.0}};
}

std::vector<int32_t> encode_prompt(const GenerateOptions& options, std::optional<tokenizer::Tokenizer>& tok,
                                   const engine::Engine& engine) {
  std::vector<int32_t> prompt;
  if (options.prompt) {
    tok.emplace(tokenizer::Tokenizer::load(options.model_dir));
    prompt = tok->encode(*options.prompt, tok->add_special_tokens_default());
    RS_CHECK(!prompt.empty(), "--prompt encodes to no tokens");
  } else {
    prompt = parse_ids(*options.prompt_ids);
  }
  for (int32_t id : prompt)
    RS_CHECK(id >= 0 && id < engine.model_config().vocab_size, "token id {} is outside the vocabulary of {}", id,
             engine.model_config().vocab_size);
  RS_CHECK(static_cast<int64_t>(prompt.size()) + options.max_new_tokens <= engine.context_length(),
           "prompt of {} tokens plus {} new tokens exceeds the context length {}", prompt.size(),
           options.max_new_tokens, engine.context_length());
  return prompt;
}

void run_generate(const GenerateOptions& options) {
  RS_CHECK(options.prompt_ids.has_value() != options.prompt.has_value(),
           "give exactly one of --prompt-ids and --prompt");
  RS_CHECK(!options.prompt || !options.prompt->empty(), "--prompt is empty: give the text to continue");
  sched::SchedulerConfig scheduler;
  scheduler.max_running_requests = 1;
  scheduler.max_prefill_tokens = options.prefill_chunk;
  scheduler.chunked_prefill_size = options.prefill_chunk;
  scheduler.speculative = options.speculative;
  serving::resolve_draft_tokens(scheduler.speculative);
  engine::EngineConfig config = options.engine;
  config.progress = make_progress_reporter();
  serving::Driver driver(options.model_dir, config, scheduler);
  std::optional<tokenizer::Tokenizer> tok;
  const std::vector<int32_t> prompt = encode_prompt(options, tok, driver.engine());

  auto request = std::make_unique<sched::Request>();
  request->prompt_ids = prompt;
  request->max_new_tokens = options.max_new_tokens;
  request->sampling = options.sampling;
  request->sampling.seed = options.seed >= 0 ? static_cast<uint64_t>(options.seed) : std::random_device{}();
  if (!options.ignore_eos) request->stop_token_ids = driver.engine().model_config().eos_token_ids;
  const size_t index = driver.submit(std::move(request));
  driver.run();
  const serving::Completion& done = driver.result(index);
  RS_CHECK(done.finish_reason != sched::FinishReason::kError, "generation failed: {}", done.error);
  nlohmann::json result = {{"output_ids", done.tokens},
                           {"finish_reason", done.finish_reason == sched::FinishReason::kStop ? "stop" : "length"},
                           {"prompt_tokens", prompt.size()},
                           {"prefill_seconds", done.first_token_seconds},
                           {"decode_seconds", done.total_seconds - done.first_token_seconds}};
  if (options.speculative.enabled()) result["speculative"] = speculative_json(scheduler.speculative, done.speculative);
  if (tok) result["text"] = tok->decode(done.tokens, /*skip_special_tokens=*/true);
  std::cout << result.dump() << std::endl;
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto options = std::make_shared<GenerateOptions>();
  CLI::App* cmd = app.add_subcommand("generate", "Generate a continuation of one prompt and print it as JSON");
  cmd->add_option("--model", options->model_dir, "Hugging Face checkpoint folder, .gguf file or hub id ORG/NAME")
      ->required()
      ->transform(model_folder());
  add_revision_option(*cmd);
  cmd->add_option("--prompt-ids", options->prompt_ids, "Comma-separated prompt token ids");
  cmd->add_option("--prompt", options->prompt, "Prompt text (needs tokenizer.json)");
  cmd->add_option("--max-new-tokens", options->max_new_tokens, "Tokens to generate")
      ->check(positive_number())
      ->capture_default_str();
  cmd->add_option("--temperature", options->sampling.temperature, "0 = greedy")
      ->check(non_negative_number())
      ->capture_default_str();
  cmd->add_option("--top-k", options->sampling.top_k, "Keep the k most likely tokens (<= 0: off)");
  cmd->add_option("--top-p", options->sampling.top_p, "Nucleus sampling mass")->check(number_in(0.0, 1.0));
  cmd->add_option("--min-p", options->sampling.min_p, "Drop tokens below min_p x the top probability")
      ->check(number_in(0.0, 1.0));
  cmd->add_option("--repetition-penalty", options->sampling.repetition_penalty, "HF repetition penalty (1 = off)")
      ->check(positive_number());
  cmd->add_option("--presence-penalty", options->sampling.presence_penalty, "OpenAI presence penalty")
      ->check(number_in(-2.0, 2.0));
  cmd->add_option("--frequency-penalty", options->sampling.frequency_penalty, "OpenAI frequency penalty")
      ->check(number_in(-2.0, 2.0));
  cmd->add_option("--seed", options->seed, "Random seed (same seed, same tokens)");
  cmd->add_option("--prefill-chunk", options->prefill_chunk, "Prefill at most this many tokens per step")
      ->check(positive_number());
  cmd->add_flag("--ignore-eos", options->ignore_eos, "Keep generating past end-of-sequence tokens");
  add_engine_options(*cmd, options->engine);
  add_speculative_options(*cmd, options->speculative);
  cmd->callback([options] { run_generate(*options); });
}

}  // namespace rs::app
