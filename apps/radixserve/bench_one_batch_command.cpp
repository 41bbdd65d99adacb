// `radixserve bench one-batch`: in-process throughput of one static batch per batch size (as SGLang's bench_one_batch
// and llama-batched-bench): B random prompts prefilled together, then decode steps of one token per sequence, beside
// the memory-bandwidth bound of a decode step (weight bytes + KV bytes read / measured bandwidth). A table on stdout;
// --json FILE also writes every figure with the command line, device, model config and the build's git revision.
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "apps/radixserve/batch_bench.h"
#include "apps/radixserve/bench_grammar.h"
#include "apps/radixserve/bench_report.h"
#include "apps/radixserve/bench_util.h"
#include "apps/radixserve/cli_checks.h"
#include "apps/radixserve/commands.h"
#include "apps/radixserve/model_option.h"
#include "base/log.h"
#include "spec/dflash_drafter.h"

namespace rs::app {
namespace {

struct OneBatchOptions {
  std::string model_dir;
  std::vector<int32_t> batch_sizes{1};
  int32_t input_len = 512;
  int32_t output_len = 128;
  int64_t max_step_tokens = 8192;
  uint32_t seed = 0;
  std::string json_path;
  std::string json_schema_path;  // structured output: every sequence constrained by this schema (or regex)
  std::string regex;
  std::string tokenizer_dir;           // the grammar's vocabulary (default: the model folder)
  std::vector<int32_t> verify_drafts;  // speculative decoding: draft lengths K whose verify pass is timed
  std::string dflash_dir;              // a DFlash drafter whose proposals are timed (--dflash-draft-model)
  int32_t draft_context_rows = 4;      // new context rows per timed proposal (the accept length it follows)
  engine::EngineConfig engine;

  // Positions a sequence needs beyond its decode steps: a verify pass writes K + 1.
  int32_t verify_room() const {
    return verify_drafts.empty() ? 0 : *std::max_element(verify_drafts.begin(), verify_drafts.end()) + 1;
  }
};

// Speculative decoding's expected tokens per verify pass with draft length K when each draft token is accepted with
// probability `acceptance` independently (the target's own next token always counts): sum of acceptance^i, i <= K.
double expected_tokens_per_verify(int32_t draft, double acceptance) {
  double tokens = 0, p = 1;
  for (int32_t i = 0; i <= draft; ++i, p *= acceptance) tokens += p;
  return tokens;
}

// The grammar of --json-schema / --regex as a request would carry it, or null when neither is given.
std::unique_ptr<BatchGrammar> make_grammar(const OneBatchOptions& options, const loader::ModelConfig& mc) {
  server::OutputConstraint constraint;
  if (!options.json_schema_path.empty()) {
    std::ifstream file(options.json_schema_path);
    RS_CHECK(file, "cannot read {}", options.json_schema_path);
    std::stringstream text;
    text << file.rdbuf();
    // As read_output_constraint keeps it: the parsed schema, key order kept.
    constraint = {.kind = server::OutputConstraint::Kind::kJsonSchema,
                  .param = "json_schema",
                  .text = nlohmann::ordered_json::parse(text.str()).dump()};
  } else if (!options.regex.empty()) {
    constraint = {.kind = server::OutputConstraint::Kind::kRegex, .param = "regex", .text = options.regex};
  } else {
    return nullptr;
  }
  const std::string dir = options.tokenizer_dir.empty() ? options.model_dir : options.tokenizer_dir;
  auto grammar =
      std::make_unique<BatchGrammar>(constraint, tokenizer::Tokenizer::load(dir), mc.vocab_size, mc.eos_token_ids);
  RS_LOG_INFO("grammar compiled in {:.1f} ms", grammar->compile_seconds() * 1e3);
  return grammar;
}

// The drafter's proposal against a decode step and, where a verify pass of its block was timed (--verify-drafts
// block - 1), the projected speed-up at accept lengths 3, 5 and 7 (tokens per verify pass): tokens x decode step over
// drafting + verifying.
void report_drafter(const std::vector<std::pair<int32_t, BatchTimings>>& runs, int32_t block, int32_t rows,
                    nlohmann::json& results) {
  std::cout << fmt::format(
                   "DFlash drafter: one proposal ({} context rows + a block of {}) against a decode step; "
                   "projected speed-up at accept length 3 / 5 / 7 (needs --verify-drafts {})\n",
                   rows, block, block - 1)
            << fmt::format("{:>6} {:>9} {:>10} {:>10} {:>20}\n", "batch", "draft ms", "x decode", "verify ms",
                           "speed-up 3/5/7");
  for (size_t i = 0; i < runs.size(); ++i) {
    const auto& [batch, t] = runs[i];
    const double decode_ms = median(t.decode_step_seconds) * 1e3, draft_ms = median(t.draft_seconds) * 1e3;
    double verify_ms = 0;
    for (const auto& [draft, seconds] : t.verify_step_seconds)
      if (draft == block - 1) verify_ms = median(seconds) * 1e3;
    nlohmann::json entry = {{"draft_ms_median", draft_ms},
                            {"relative_to_decode_step", draft_ms / decode_ms},
                            {"block_size", block},
                            {"context_rows", rows}};
    std::string gains = "-";
    if (verify_ms > 0) {
      const auto gain = [&](double accept) { return accept * decode_ms / (draft_ms + verify_ms); };
      gains = fmt::format("{:.2f} {:.2f} {:.2f}", gain(3), gain(5), gain(7));
      entry["verify_ms_median"] = verify_ms;
      entry["projected_speedup"] = {{"3", gain(3)}, {"5", gain(5)}, {"7", gain(7)}};
    }
    std::cout << fmt::format("{:>6} {:>9.2f} {:>10.3f} {:>10.2f} {:>20}\n", batch, draft_ms, draft_ms / decode_ms,
                             verify_ms, gains);
    results[i]["dflash"] = entry;
  }
}

// Sizes the engine for the largest batch: its requests, their context, their KV pages (unless --kv-cache-gb).
// `capture`: layers the target captures for a draft head (their f32 rows per KV slot share the KV budget).
engine::EngineConfig engine_config_for(const OneBatchOptions& options, int32_t max_batch,
                                       std::vector<int32_t> capture = {}) {
  engine::EngineConfig config = options.engine;
  const int64_t context = options.input_len + options.output_len + options.verify_room();
  config.max_running_requests = max_batch;
  config.max_step_tokens = options.max_step_tokens;
  config.context_length =
      std::max<int64_t>(config.context_length, (context + config.page_size - 1) / config.page_size * config.page_size);
  const loader::ModelConfig model = loader::load_model_config(options.model_dir);
  // Hybrid models: a recurrent-state slot per sequence, and with --verify-drafts one more per draft token for the
  // verify pass's checkpoints (BatchBench takes them from its MemoryManager).
  const memory::StateGeometry geometry = engine::state_geometry_of(model);
  if (!geometry.empty() && config.num_state_slots == 0)
    config.num_state_slots = max_batch * (1 + std::max(options.verify_room() - 1, 0));
  if (config.kv_cache_gb == 0) {
    memory::KvPoolConfig kv;
    kv.page_size = config.page_size;
    kv.num_kv_heads = model.num_kv_heads;
    kv.head_dim = model.head_dim;
    kv.dtype = engine::kv_cache_dtype(config, model);
    kv.groups = memory::group_layers_by_window(model.layer_windows);
    // The state slots come out of the same budget as the KV pages.
    const size_t features = capture.size() * static_cast<size_t>(model.hidden_size) * sizeof(float);
    const size_t bytes = kv_bytes_for_batch(kv, max_batch, context, options.max_step_tokens) +
                         static_cast<size_t>(config.num_state_slots) * memory::slot_bytes(geometry) +
                         features * static_cast<size_t>(max_batch) * static_cast<size_t>(context + kv.page_size);
    config.kv_cache_gb = static_cast<double>(bytes) / (1ull << 30);
  }
  config.capture_hidden_layers = std::move(capture);
  config.progress = make_progress_reporter();
  return config;
}

// --dflash-draft-model: the drafter's engine sized as the target's for the same batch (no graphs: its steps mix
// context and block rows), bound to `target`, which captures the layers it reads.
std::unique_ptr<spec::DFlashDrafter> make_dflash_drafter(const OneBatchOptions& options, int32_t max_batch,
                                                         engine::Engine& target) {
  if (options.dflash_dir.empty()) return nullptr;
  OneBatchOptions drafter_options = options;
  drafter_options.model_dir = options.dflash_dir;
  engine::EngineConfig config = engine_config_for(drafter_options, max_batch);
  config.quantization.clear();
  config.cuda_graph_max_batch = 0;
  return std::make_unique<spec::DFlashDrafter>(std::make_unique<engine::Engine>(options.dflash_dir, config), target);
}

void run_one_batch(const OneBatchOptions& options) {
  const int32_t max_batch = *std::max_element(options.batch_sizes.begin(), options.batch_sizes.end());
  const int32_t context = options.input_len + options.output_len + options.verify_room();
  // Before the engine loads, so that a bad schema or a missing tokenizer fails fast.
  const std::unique_ptr<BatchGrammar> grammar = make_grammar(options, loader::load_model_config(options.model_dir));
  std::vector<int32_t> capture;  // the layers a DFlash drafter reads
  if (!options.dflash_dir.empty()) {
    const loader::ModelConfig drafter = loader::load_model_config(options.dflash_dir);
    RS_CHECK(drafter.is_dflash(), "--dflash-draft-model {} is not a DFlash drafter (DFlashDraftModel)",
             options.dflash_dir);
    capture = drafter.draft_capture_layers(loader::load_model_config(options.model_dir).num_layers);
  }
  engine::Engine engine(options.model_dir, engine_config_for(options, max_batch, capture));
  const std::unique_ptr<spec::DFlashDrafter> drafter = make_dflash_drafter(options, max_batch, engine);
  const DraftTiming draft_timing{.drafter = drafter.get(),
                                 .feature_group = engine.feature_group(),
                                 .context_rows = options.draft_context_rows,
                                 .max_tokens = drafter ? drafter->block_size() - 1 : 0};
  const auto& mc = engine.model_config();
  const memory::KvPoolConfig& kv_config = engine.kv_pool().config();
  BatchBench bench(engine, max_batch, context, options.max_step_tokens);
  std::mt19937 rng(options.seed);
  std::uniform_int_distribution<int32_t> token(0, mc.vocab_size - 1);
  auto prompts = [&](int32_t batch, int32_t length) {
    std::vector<std::vector<int32_t>> out(batch, std::vector<int32_t>(length));
    for (auto& prompt : out)
      for (auto& id : prompt) id = token(rng);
    return out;
  };
  // Warm-up, so that lazily created handles, scratch growth and (re)recorded decode graphs stay out of the timings: a
  // prefill step as large as any the runs take, then decode steps of the largest batch.
  RS_LOG_INFO("warm-up");
  const int64_t largest_step = std::min<int64_t>(options.max_step_tokens, int64_t{max_batch} * options.input_len);
  const auto warm_batch = static_cast<int32_t>((largest_step + options.input_len - 1) / options.input_len);
  bench.run(prompts(warm_batch, options.input_len), 1);
  bench.run(prompts(max_batch, std::min(options.input_len, 8)), std::min(options.output_len, 3));
  if (grammar)
    bench.run(prompts(max_batch, std::min(options.input_len, 8)), std::min(options.output_len, 3), grammar.get());

  std::vector<std::pair<int32_t, BatchTimings>> runs;
  std::vector<nlohmann::json> grammar_results;
  for (int32_t batch : options.batch_sizes) {
    RS_LOG_INFO("batch {}: prefill {} x {} tokens, decode {} steps", batch, batch, options.input_len,
                options.output_len);
    const auto batch_prompts = prompts(batch, options.input_len);
    runs.emplace_back(batch,
                      bench.run(batch_prompts, options.output_len, nullptr, options.verify_drafts, draft_timing));
    if (!grammar) continue;
    RS_LOG_INFO("batch {}: the same, constrained", batch);  // same prompts, so the same KV lengths step by step
    grammar_results.push_back(
        grammar_result(runs.back().second, bench.run(batch_prompts, options.output_len, grammar.get()), *grammar));
  }
  std::string bandwidth_method;
  const double bandwidth = measure_engine_bandwidth(engine, &bandwidth_method);  // GB/s
  const DecodeWeightBytes weights = decode_weight_bytes(engine);
  const std::string expert_text =
      weights.experts == 0 ? std::string()
                           : fmt::format(
                                 " + {:.1f} MiB of routed experts, of which a batch reads the share its tokens "
                                 "select ({} of {} per token, uniform routing)",
                                 weights.experts / double(1 << 20), weights.top_k, weights.num_experts);

  const double state_slot_bytes = static_cast<double>(memory::slot_bytes(engine.state_pool().geometry()));
  const std::string state_text = state_slot_bytes == 0
                                     ? std::string()
                                     : fmt::format(", {:.1f} MiB of recurrent state per sequence (read and written)",
                                                   state_slot_bytes / (1 << 20));

  nlohmann::json results = nlohmann::json::array();
  std::cout << fmt::format("{} on {}: weights read per step {:.1f} MiB{}{}, KV cache {}, bandwidth {:.1f} GB/s ({})\n",
                           mc.architecture, engine.backend().name(), weights.dense / double(1 << 20), expert_text,
                           state_text, dtype_name(kv_config.dtype), bandwidth, bandwidth_method)
            << fmt::format("{:>6} {:>14} {:>13} {:>10} {:>9} {:>12} {:>12} {:>9}\n", "batch", "prefill tok/s",
                           "decode tok/s", "tok/s/seq", "step ms", "KV MiB/step", "bound tok/s", "of bound");
  for (const auto& [batch, t] : runs) {
    const double prefill_rate = double(batch) * options.input_len / t.prefill_seconds;
    const double decode_rate = double(batch) * options.output_len / t.decode_seconds;
    const double kv_bytes = kv_bytes_read_per_decode_step(kv_config, batch, options.input_len, options.output_len);
    const double weight_bytes = weights.per_step(batch);
    const double state_bytes = 2.0 * batch * state_slot_bytes;  // each sequence's recurrent state, read and written
    const double step_bytes = weight_bytes + kv_bytes + state_bytes;
    const double bound = bandwidth > 0 ? batch * bandwidth * 1e9 / step_bytes : 0.0;
    const double step_ms = median(t.decode_step_seconds) * 1e3;
    std::cout << fmt::format("{:>6} {:>14.1f} {:>13.1f} {:>10.2f} {:>9.2f} {:>12.2f} {:>12.1f} {:>9.3f}\n", batch,
                             prefill_rate, decode_rate, decode_rate / batch, step_ms, kv_bytes / (1 << 20), bound,
                             bound > 0 ? decode_rate / bound : 0.0);
    results.push_back({{"batch_size", batch},
                       {"prefill_seconds", t.prefill_seconds},
                       {"prefill_steps", t.prefill_steps},
                       {"prefill_tokens_per_s", prefill_rate},
                       {"decode_seconds", t.decode_seconds},
                       {"decode_tokens_per_s", decode_rate},
                       {"decode_tokens_per_s_per_seq", decode_rate / batch},
                       {"decode_step_ms_median", step_ms},
                       {"weight_bytes_per_step", weight_bytes},
                       {"kv_bytes_per_step", kv_bytes},
                       {"state_bytes_per_step", state_bytes},
                       {"bytes_per_step", step_bytes},
                       {"bound_tokens_per_s", bound},
                       {"fraction_of_bound", bound > 0 ? decode_rate / bound : 0.0}});
  }
  if (!options.verify_drafts.empty()) {
    std::cout << "speculative verify pass (every sequence K + 1 tokens, all sampled) against a decode step; projected "
                 "speed-up for a free drafter (n-gram) at per-token acceptance 100% / 70% / 40%\n"
              << fmt::format("{:>6} {:>4} {:>9} {:>12} {:>22}\n", "batch", "K", "step ms", "x decode",
                             "speed-up 100/70/40%");
    for (size_t i = 0; i < runs.size(); ++i) {
      const auto& [batch, t] = runs[i];
      const double decode_ms = median(t.decode_step_seconds) * 1e3;
      nlohmann::json verify = nlohmann::json::array();
      for (const auto& [draft, seconds] : t.verify_step_seconds) {
        const double ms = median(seconds) * 1e3, ratio = ms / decode_ms;
        const double gains[] = {expected_tokens_per_verify(draft, 1.0) / ratio,
                                expected_tokens_per_verify(draft, 0.7) / ratio,
                                expected_tokens_per_verify(draft, 0.4) / ratio};
        std::cout << fmt::format("{:>6} {:>4} {:>9.2f} {:>12.2f} {:>8.2f} {:>6.2f} {:>6.2f}\n", batch, draft, ms, ratio,
                                 gains[0], gains[1], gains[2]);
        verify.push_back({{"draft_tokens", draft},
                          {"step_ms_median", ms},
                          {"relative_to_decode_step", ratio},
                          {"projected_speedup", {{"1.0", gains[0]}, {"0.7", gains[1]}, {"0.4", gains[2]}}}});
      }
      results[i]["verify"] = verify;
    }
  }
  if (drafter) report_drafter(runs, drafter->block_size(), options.draft_context_rows, results);
  nlohmann::json grammar_json;  // null without a grammar
  if (grammar) {
    grammar_json = {{"json_schema", options.json_schema_path},
                    {"regex", options.regex},
                    {"compile_ms", grammar->compile_seconds() * 1e3}};
    std::cout << fmt::format(
                     "structured output ({}): compiled in {:.1f} ms; decode steps where every sequence is "
                     "constrained, against the same steps unconstrained\n",
                     options.regex.empty() ? options.json_schema_path : "--regex", grammar->compile_seconds() * 1e3)
              << grammar_table_header();
    for (size_t i = 0; i < runs.size(); ++i) {
      std::cout << grammar_table_row(runs[i].first, grammar_results[i]);
      results[i]["structured_output"] = grammar_results[i];
    }
  }
  std::cout.flush();
  if (options.json_path.empty()) return;
  const nlohmann::json report = {{"command_line", command_line()},
                                 {"git_revision", git_revision()},
                                 {"backend", engine.config().backend},
                                 {"device", engine.backend().name()},
                                 {"model", model_json(options.model_dir, mc)},
                                 {"load_format", engine.config().load_format},
                                 {"kv_cache_dtype", std::string(dtype_name(kv_config.dtype))},
                                 {"kv_cache_bytes", engine.kv_pool().total_bytes()},
                                 {"page_size", kv_config.page_size},
                                 {"input_len", options.input_len},
                                 {"output_len", options.output_len},
                                 {"max_step_tokens", options.max_step_tokens},
                                 {"seed", options.seed},
                                 {"dense_weight_bytes", weights.dense},
                                 {"expert_weight_bytes", weights.experts},
                                 {"num_experts", weights.num_experts},
                                 {"experts_per_token", weights.top_k},
                                 {"bandwidth_gb_per_s", bandwidth},
                                 {"bandwidth_method", bandwidth_method},
                                 {"structured_output", grammar_json},
                                 {"results", results}};
  write_json_report(options.json_path, report);
}

}  // namespace

CLI::App* add_bench_one_batch_command(CLI::App& bench) {
  auto options = std::make_shared<OneBatchOptions>();
  CLI::App* cmd = bench.add_subcommand("one-batch", "Prefill and decode one static batch per batch size (a table)");
  cmd->add_option("--model", options->model_dir, "Checkpoint folder (config.json is enough with --load-format dummy)")
      ->required()
      ->transform(model_folder());
  cmd->add_option("--batch-size", options->batch_sizes, "Batch sizes to run, in order (e.g. 1,8,32,128)")
      ->delimiter(',')
      ->check(CLI::Range(1, 65536))
      ->capture_default_str();
  cmd->add_option("--input-len", options->input_len, "Prompt tokens per sequence (random ids)")
      ->check(positive_number())
      ->capture_default_str();
  cmd->add_option("--output-len", options->output_len, "Decode steps (one token per sequence each)")
      ->check(positive_number())
      ->capture_default_str();
  cmd->add_option("--max-step-tokens", options->max_step_tokens, "Token budget of one prefill step")
      ->check(positive_number())
      ->capture_default_str();
  cmd->add_option("--seed", options->seed, "Seed of the random prompts")->capture_default_str();
  cmd->add_option("--json", options->json_path, "Also write every figure, with the run's context, to this file");
  cmd->add_option("--verify-drafts", options->verify_drafts,
                  "Speculative decoding: also time verify passes of these draft lengths (e.g. 1,2,4,8) per batch")
      ->delimiter(',')
      ->check(CLI::Range(1, 64));
  cmd->add_option("--dflash-draft-model", options->dflash_dir,
                  "Speculative decoding: also time this DFlash drafter's proposals (every sequence, one block each) "
                  "per batch")
      ->transform(model_folder());
  cmd->add_option("--draft-context-rows", options->draft_context_rows,
                  "New context rows a timed DFlash proposal reads first (the accept length it follows)")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  cmd->add_option("--json-schema", options->json_schema_path,
                  "Constrain every sequence by this JSON Schema, as response_format json_schema would, and report the "
                  "cost of its token masks")
      ->check(CLI::ExistingFile);
  cmd->add_option("--regex", options->regex, "The same with a regex (SGLang's regex)")->excludes("--json-schema");
  cmd->add_option("--tokenizer", options->tokenizer_dir,
                  "Folder of the tokenizer.json the grammar reads (default: --model; dummy configs lack one)")
      ->check(CLI::ExistingDirectory);
  add_engine_options(*cmd, options->engine);
  cmd->get_option("--kv-cache-gb")->description("KV cache budget in GiB (0 = enough for the largest batch)");
  cmd->get_option("--context-length")->description("Max tokens per sequence (at least input + output length)");
  cmd->callback([options] { run_one_batch(*options); });
  return cmd;
}

}  // namespace rs::app
