// `radixserve generate`: one prompt in, one JSON object out ({"output_ids": [...], ...}); no server, no scheduler.
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "apps/radixserve/commands.h"
#include "base/clock.h"
#include "engine/single_sequence.h"
#include "tokenizer/tokenizer.h"

namespace rs::app {
namespace {

struct GenerateOptions {
  std::string model_dir;
  std::string prompt_ids;
  std::string prompt;
  int32_t max_new_tokens = 32;
  int32_t prefill_chunk = 2048;
  bool ignore_eos = false;
  engine::SamplingParams sampling{.temperature = 0.0f};
  int64_t seed = -1;
  engine::EngineConfig engine;
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

void run_generate(const GenerateOptions& options) {
  RS_CHECK(options.prompt_ids.empty() != options.prompt.empty(), "give exactly one of --prompt-ids and --prompt");
  engine::EngineConfig config = options.engine;
  config.max_running_requests = 1;
  config.max_step_tokens = options.prefill_chunk;
  config.progress = make_progress_reporter();
  engine::Engine engine(options.model_dir, config);

  std::optional<tokenizer::Tokenizer> tok;
  std::vector<int32_t> prompt;
  if (!options.prompt.empty()) {
    tok.emplace(tokenizer::Tokenizer::load(options.model_dir));
    prompt = tok->encode(options.prompt, tok->add_special_tokens_default());
  } else {
    prompt = parse_ids(options.prompt_ids);
  }
  for (int32_t id : prompt)
    RS_CHECK(id >= 0 && id < engine.model_config().vocab_size, "token id {} is outside the vocabulary of {}", id,
             engine.model_config().vocab_size);
  RS_CHECK(static_cast<int64_t>(prompt.size()) + options.max_new_tokens <= engine.context_length(),
           "prompt of {} tokens plus {} new tokens exceeds the context length {}", prompt.size(),
           options.max_new_tokens, engine.context_length());

  const uint64_t seed = options.seed >= 0 ? static_cast<uint64_t>(options.seed) : std::random_device{}();
  std::vector<int32_t> output;
  engine::SamplingRow row{&options.sampling, prompt, output, seed};
  engine::SingleSequence sequence(engine);
  const auto& eos = engine.model_config().eos_token_ids;
  std::string finish_reason = "length";
  const auto start = Clock::now();
  engine::SampledToken token = sequence.prefill(prompt, row, options.prefill_chunk);
  const double prefill_s = seconds_since(start);
  const auto decode_start = Clock::now();
  while (static_cast<int32_t>(output.size()) < options.max_new_tokens) {
    output.push_back(token.token_id);
    if (!options.ignore_eos && std::find(eos.begin(), eos.end(), token.token_id) != eos.end()) {
      finish_reason = "stop";
      break;
    }
    if (static_cast<int32_t>(output.size()) == options.max_new_tokens) break;
    row.output_ids = output;
    token = sequence.feed(std::span(&output.back(), 1), row);
  }
  const double decode_s = seconds_since(decode_start);
  nlohmann::json result = {{"output_ids", output},
                           {"finish_reason", finish_reason},
                           {"prompt_tokens", prompt.size()},
                           {"prefill_seconds", prefill_s},
                           {"decode_seconds", decode_s}};
  if (tok) result["text"] = tok->decode(output, /*skip_special_tokens=*/true);
  std::cout << result.dump() << std::endl;
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto options = std::make_shared<GenerateOptions>();
  CLI::App* cmd = app.add_subcommand("generate", "Generate a continuation of one prompt and print it as JSON");
  cmd->add_option("--model", options->model_dir, "Hugging Face checkpoint folder")
      ->required()
      ->check(CLI::ExistingDirectory);
  cmd->add_option("--prompt-ids", options->prompt_ids, "Comma-separated prompt token ids");
  cmd->add_option("--prompt", options->prompt, "Prompt text (needs tokenizer.json)");
  cmd->add_option("--max-new-tokens", options->max_new_tokens, "Tokens to generate")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--temperature", options->sampling.temperature, "0 = greedy")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--top-k", options->sampling.top_k, "Keep the k most likely tokens (<= 0: off)");
  cmd->add_option("--top-p", options->sampling.top_p, "Nucleus sampling mass")->check(CLI::Range(0.0f, 1.0f));
  cmd->add_option("--min-p", options->sampling.min_p, "Drop tokens below min_p x the top probability")
      ->check(CLI::Range(0.0f, 1.0f));
  cmd->add_option("--repetition-penalty", options->sampling.repetition_penalty, "HF repetition penalty (1 = off)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--presence-penalty", options->sampling.presence_penalty, "OpenAI presence penalty");
  cmd->add_option("--frequency-penalty", options->sampling.frequency_penalty, "OpenAI frequency penalty");
  cmd->add_option("--seed", options->seed, "Random seed (same seed, same tokens)");
  cmd->add_option("--prefill-chunk", options->prefill_chunk, "Prefill at most this many tokens per step")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--ignore-eos", options->ignore_eos, "Keep generating past end-of-sequence tokens");
  add_engine_options(*cmd, options->engine);
  cmd->callback([options] { run_generate(*options); });
}

}  // namespace rs::app
