// `radixserve bench`: prefill and decode throughput of one sequence through serve's engine and scheduler, beside the
// memory-bandwidth bound (weight bytes read per decoded token / measured read bandwidth). Prints one JSON object. Its
// subcommands: `bench one-batch` (static batches), `bench throughput` (offline, through the scheduler) and `bench
// serve` (load on a running server).
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>

#include "apps/radixserve/bench_util.h"
#include "apps/radixserve/cli_checks.h"
#include "apps/radixserve/commands.h"
#include "apps/radixserve/model_option.h"
#include "base/clock.h"
#include "base/thread_pool.h"
#include "serving/driver.h"

namespace rs::app {
namespace {

struct BenchOptions {
  std::string model_dir;
  int32_t prompt_tokens = 128;
  int32_t decode_tokens = 64;
  int32_t repeats = 3;
  engine::EngineConfig engine;
};

void run_bench(const BenchOptions& options) {
  engine::EngineConfig config = options.engine;
  config.progress = make_progress_reporter();
  // One request at a time through serve's scheduler: the prompt in one step, then one token per step.
  sched::SchedulerConfig scheduler;
  scheduler.max_running_requests = 1;
  scheduler.max_prefill_tokens = options.prompt_tokens;
  scheduler.chunked_prefill_size = options.prompt_tokens;
  serving::Driver driver(options.model_dir, config, scheduler);
  engine::Engine& engine = driver.engine();
  const auto& mc = engine.model_config();
  std::mt19937 rng(0);
  std::uniform_int_distribution<int32_t> token(0, mc.vocab_size - 1);
  const engine::SamplingParams greedy{.temperature = 0.0f};

  std::vector<double> prefill_rates, decode_rates;
  for (int32_t r = 0; r < options.repeats; ++r) {
    std::vector<int32_t> prompt(options.prompt_tokens);
    for (auto& id : prompt) id = token(rng);
    // The prefill's step gives the first token; each of decode_tokens steps one more.
    const serving::Completion& done = driver.generate(prompt, greedy, options.decode_tokens + 1);
    RS_CHECK(done.finish_reason == sched::FinishReason::kLength, "bench request failed: {}", done.error);
    prefill_rates.push_back(options.prompt_tokens / done.first_token_seconds);
    decode_rates.push_back(options.decode_tokens / (done.total_seconds - done.first_token_seconds));
  }
  // Per decoded token every weight is read once (MoE: the selected experts), except the embedding table when the LM
  // head is separate.
  const double bytes_per_token = decode_weight_bytes(engine).per_step(1);
  const int threads = config.num_threads > 0 ? config.num_threads : hardware_threads();
  const double bandwidth = engine.backend().device().is_cpu() ? measure_read_bandwidth(threads) : 0.0;
  nlohmann::json result = {
      {"model", options.model_dir},
      {"architecture", mc.architecture},
      {"backend", engine.backend().name()},
      {"prompt_tokens", options.prompt_tokens},
      {"decode_tokens", options.decode_tokens},
      {"repeats", options.repeats},
      {"prefill_tokens_per_s", median(prefill_rates)},
      {"decode_tokens_per_s", median(decode_rates)},
      {"weight_bytes_per_token", bytes_per_token},
  };
  if (bandwidth > 0) {
    result["read_bandwidth_gb_per_s"] = bandwidth;
    result["decode_bound_tokens_per_s"] = bandwidth * 1e9 / bytes_per_token;
    result["decode_fraction_of_bound"] = median(decode_rates) / (bandwidth * 1e9 / bytes_per_token);
  }
  std::cout << result.dump(2) << std::endl;
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto options = std::make_shared<BenchOptions>();
  CLI::App* cmd = app.add_subcommand("bench", "Measure prefill and decode throughput (JSON on stdout)");
  // Not ->required(): `bench one-batch --model X` leaves this one empty; the callback checks it.
  cmd->add_option("--model", options->model_dir, "Checkpoint folder (config.json is enough with --load-format dummy)")
      ->transform(model_folder());
  cmd->add_option("--prompt-tokens", options->prompt_tokens, "Prompt length")
      ->check(positive_number())
      ->capture_default_str();
  cmd->add_option("--decode-tokens", options->decode_tokens, "Tokens decoded after the prompt")
      ->check(positive_number())
      ->capture_default_str();
  cmd->add_option("--repeats", options->repeats, "Runs; the median is reported")
      ->check(positive_number())
      ->capture_default_str();
  add_engine_options(*cmd, options->engine);
  add_bench_one_batch_command(*cmd);
  add_bench_throughput_command(*cmd);
  add_bench_serve_command(*cmd);
  // Subcommand callbacks run before their parent's: plain `bench` runs only when no subcommand was given.
  cmd->callback([options, cmd] {
    if (!cmd->get_subcommands().empty()) return;
    if (options->model_dir.empty()) throw CLI::RequiredError("--model");
    run_bench(*options);
  });
}

}  // namespace rs::app
