// `radixserve bench throughput`: offline throughput through the serving path minus HTTP (as SGLang's
// bench_offline_throughput): the engine and scheduler of `serve` (ServingStack), every request submitted at once,
// greedy, EOS ignored so each produces its output length. Prompts are random token ids (lengths uniform in
// [L * (1 - R), L], seeded) or a JSONL dataset of {"prompt": text, "output_len": n} tokenized by the model's
// tokenizer. Reports requests/s, input, output and total tok/s, and mean / p50 / p99 TTFT and latency.
#include <fmt/format.h>

#include <fstream>
#include <iostream>

#include "apps/radixserve/bench_report.h"
#include "apps/radixserve/cli_checks.h"
#include "apps/radixserve/commands.h"
#include "apps/radixserve/model_option.h"
#include "apps/radixserve/scheduler_options.h"
#include "base/error.h"
#include "base/log.h"
#include "loadgen/latency_stats.h"
#include "loadgen/workload.h"
#include "serving/serving_stack.h"
#include "tokenizer/tokenizer.h"

namespace rs::app {
namespace {

struct ThroughputOptions {
  std::string model_dir;
  loadgen::WorkloadConfig workload{.num_prompts = 64, .input_len = 128, .output_len = 64};
  std::string dataset_path;
  std::string json_path;
  bool max_running_given = false;
  engine::EngineConfig engine;
  sched::SchedulerConfig scheduler;
};

struct BenchPrompt {
  std::vector<int32_t> ids;
  int32_t output_len = 0;
};

// The first `count` lines of a JSONL file of {"prompt": text, "output_len": n (optional)}, tokenized.
std::vector<BenchPrompt> load_dataset(const ThroughputOptions& options) {
  std::ifstream in(options.dataset_path);
  RS_CHECK(in, "cannot read --dataset {}", options.dataset_path);
  const auto tokenizer = tokenizer::Tokenizer::load(options.model_dir);
  std::vector<BenchPrompt> prompts;
  std::string line;
  for (int line_number = 1; std::getline(in, line) && prompts.size() < size_t(options.workload.num_prompts);
       ++line_number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const auto row = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    RS_CHECK(row.is_object() && row.contains("prompt") && row["prompt"].is_string(),
             "{}:{}: expected an object with a string \"prompt\"", options.dataset_path, line_number);
    BenchPrompt prompt{
        .ids = tokenizer.encode(row["prompt"].get<std::string>(), tokenizer.add_special_tokens_default()),
        .output_len = row.value("output_len", options.workload.output_len)};
    RS_CHECK(!prompt.ids.empty() && prompt.output_len > 0, "{}:{}: empty prompt or output_len < 1",
             options.dataset_path, line_number);
    prompts.push_back(std::move(prompt));
  }
  RS_CHECK(!prompts.empty(), "--dataset {} holds no prompts", options.dataset_path);
  return prompts;
}

std::vector<BenchPrompt> make_prompts(const ThroughputOptions& options, int32_t vocab_size) {
  if (!options.dataset_path.empty()) return load_dataset(options);
  loadgen::WorkloadConfig workload = options.workload;
  workload.vocab_size = vocab_size;
  std::vector<BenchPrompt> prompts;
  for (loadgen::Prompt& p : loadgen::make_prompts(workload))
    prompts.push_back(BenchPrompt{.ids = std::move(p.token_ids), .output_len = p.output_len});
  return prompts;
}

// What one request measured, from its token events.
struct Outcome {
  double ttft_s = -1, latency_s = 0;
  int32_t prompt_tokens = 0, cached_tokens = 0, output_tokens = 0;
  sched::FinishReason reason = sched::FinishReason::kNone;
  std::string error;
};

// Submits every prompt at once on one shared stream (events tell requests apart by choice_index) and waits for all.
std::vector<Outcome> run_all(sched::Scheduler& scheduler, const std::vector<BenchPrompt>& prompts, double& seconds) {
  auto stream = std::make_shared<sched::TokenStream>();
  std::vector<Outcome> outcomes(prompts.size());
  const auto start = Clock::now();
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto request = std::make_unique<sched::Request>();
    request->id = i + 1;
    request->prompt_ids = prompts[i].ids;
    request->sampling.temperature = 0.0f;
    request->max_new_tokens = prompts[i].output_len;  // no stop tokens: EOS ignored
    request->stream = stream;
    request->choice_index = static_cast<int32_t>(i);
    RS_CHECK(scheduler.submit(std::move(request)), "the scheduler refused request {}", i);
  }
  ProgressLine progress;
  size_t finished = 0;
  int64_t tokens = 0;
  const auto line = [&] {
    return fmt::format("{}/{} requests done, {} tokens, {:.1f} s", finished, prompts.size(), tokens,
                       seconds_since(start));
  };
  while (finished < prompts.size()) {
    auto event = stream->events.pop_for(std::chrono::milliseconds(500));
    if (event) {
      Outcome& o = outcomes.at(event->choice_index);
      const double now = seconds_since(start);
      if (event->prompt_tokens > 0) {
        o.prompt_tokens = event->prompt_tokens;
        o.cached_tokens = event->cached_tokens;
      }
      if (!event->tokens.empty() && o.ttft_s < 0) o.ttft_s = now;
      o.output_tokens += static_cast<int32_t>(event->tokens.size());
      tokens += static_cast<int64_t>(event->tokens.size());
      if (event->finished) {
        o.latency_s = now;
        o.reason = event->finish_reason;
        o.error = event->error;
        ++finished;
      }
    }
    progress.update(line());
  }
  seconds = seconds_since(start);
  progress.finish(line());
  return outcomes;
}

void print_row(const std::string& name, const std::string& value) {
  std::cout << fmt::format("{:<34}{}\n", name, value);
}

void run_throughput(ThroughputOptions options) {
  const loadgen::WorkloadConfig& w = options.workload;
  const loader::ModelConfig model = loader::load_model_config(options.model_dir);
  const std::vector<BenchPrompt> prompts = make_prompts(options, model.vocab_size);
  int64_t longest = 0, input_tokens = 0, asked_tokens = 0;
  for (const BenchPrompt& p : prompts) {
    longest = std::max<int64_t>(longest, static_cast<int64_t>(p.ids.size()) + p.output_len);
    input_tokens += static_cast<int64_t>(p.ids.size());
    asked_tokens += p.output_len;
  }
  const auto num_prompts = static_cast<int32_t>(prompts.size());
  // Defaults fitted to the workload: every request may run at once (up to 128), and without --context-length each
  // sequence's context (and so the KV pool) is sized for the longest request, as `bench one-batch` does.
  if (!options.max_running_given) options.scheduler.max_running_requests = std::min(num_prompts, 128);
  options.scheduler.max_queued_requests = std::max(options.scheduler.max_queued_requests, num_prompts + 1);
  serving::resolve_draft_tokens(options.scheduler.speculative);
  engine::EngineConfig engine_config = options.engine;
  if (engine_config.context_length == 0)
    engine_config.context_length =
        (longest + engine_config.page_size - 1) / engine_config.page_size * engine_config.page_size;
  engine_config.progress = make_progress_reporter();
  serving::ServingStack stack(options.model_dir, engine_config, options.scheduler);
  engine::Engine& engine = stack.engine();
  RS_CHECK(longest <= stack.max_request_tokens(), "a request spans {} tokens but the engine allows {}", longest,
           stack.max_request_tokens());

  RS_LOG_INFO("warm-up");
  double seconds = 0;
  run_all(
      stack.scheduler(),
      {BenchPrompt{.ids = std::vector<int32_t>(prompts[0].ids.begin(),
                                               prompts[0].ids.begin() + std::min<size_t>(prompts[0].ids.size(), 32)),
                   .output_len = 2}},
      seconds);
  stack.scheduler().flush_cache();
  const sched::SchedulerStats before = stack.scheduler().stats();
  const std::vector<Outcome> outcomes = run_all(stack.scheduler(), prompts, seconds);
  const sched::SchedulerStats after = stack.scheduler().stats();
  stack.stop();
  const uint64_t steps = after.steps - before.steps, verifies = after.spec_verifies - before.spec_verifies;
  const uint64_t drafted = after.spec_draft_tokens - before.spec_draft_tokens;
  const uint64_t accepted = after.spec_accepted_tokens - before.spec_accepted_tokens;
  const double accept_length = verifies ? 1.0 + static_cast<double>(accepted) / verifies : 0.0;
  // How full the batch stayed: the cache's capacity, retractions under its pressure, and the host's share of a step.
  const memory::KvPoolConfig& pool = engine.kv_pool().config();
  const int64_t kv_tokens = pool.groups.empty() ? 0 : pool.groups.front().num_pages * pool.page_size;
  const uint64_t preemptions = after.preemptions - before.preemptions;
  const double step_seconds = after.step_seconds - before.step_seconds;
  const double forward_seconds = after.forward_seconds - before.forward_seconds;
  const double acceptance = drafted ? static_cast<double>(accepted) / drafted : 0.0;

  int64_t prompt_tokens = 0, cached_tokens = 0, output_tokens = 0, failed = 0, short_count = 0;
  std::vector<double> ttft, latency;
  std::string first_error;
  for (size_t i = 0; i < outcomes.size(); ++i) {
    const Outcome& o = outcomes[i];
    prompt_tokens += o.prompt_tokens;
    cached_tokens += o.cached_tokens;
    output_tokens += o.output_tokens;
    if (o.reason != sched::FinishReason::kLength && o.reason != sched::FinishReason::kStop) {
      if (failed++ == 0) first_error = o.error;
      continue;
    }
    if (o.output_tokens != prompts[i].output_len) ++short_count;
    if (o.ttft_s >= 0) ttft.push_back(o.ttft_s);
    latency.push_back(o.latency_s);
  }
  const loadgen::Distribution ttft_s = loadgen::summarize(ttft), latency_s = loadgen::summarize(latency);
  const double completed = static_cast<double>(num_prompts - failed);
  const auto ms3 = [](const loadgen::Distribution& d) {
    return fmt::format("{:.1f} / {:.1f} / {:.1f}", d.mean * 1e3, d.p50 * 1e3, d.p99 * 1e3);
  };
  std::cout << "=========== Offline throughput (bench throughput) ===========\n";
  print_row("Model", fmt::format("{} ({}, {})", options.model_dir, model.architecture, engine.config().load_format));
  print_row("Device", engine.backend().name());
  print_row("Max running requests", std::to_string(options.scheduler.max_running_requests));
  print_row("Successful requests", fmt::format("{} / {}", num_prompts - failed, num_prompts));
  print_row("Benchmark duration (s)", fmt::format("{:.3f}", seconds));
  print_row("Total input tokens", fmt::format("{} ({} from the prefix cache)", prompt_tokens, cached_tokens));
  print_row("Total generated tokens", fmt::format("{} (asked {})", output_tokens, asked_tokens));
  print_row("Request throughput (req/s)", fmt::format("{:.2f}", completed / seconds));
  print_row("Input token throughput (tok/s)", fmt::format("{:.1f}", prompt_tokens / seconds));
  print_row("Output token throughput (tok/s)", fmt::format("{:.1f}", output_tokens / seconds));
  print_row("Total token throughput (tok/s)", fmt::format("{:.1f}", (prompt_tokens + output_tokens) / seconds));
  print_row("TTFT mean / p50 / p99 (ms)", ms3(ttft_s));
  print_row("Latency mean / p50 / p99 (ms)", ms3(latency_s));
  print_row("Engine steps", std::to_string(steps));
  print_row("KV cache", fmt::format("{} tokens of full attention in {} MiB of {}", kv_tokens,
                                    engine.kv_pool().total_bytes() >> 20, dtype_name(pool.dtype)));
  print_row("Generated tokens per step (mean)", fmt::format("{:.1f}", steps ? double(output_tokens) / steps : 0.0));
  print_row("Preemptions (retract + recompute)", std::to_string(preemptions));
  print_row("Forward share of step time",
            fmt::format("{:.1f}%", step_seconds > 0 ? 100 * forward_seconds / step_seconds : 0.0));
  if (options.scheduler.speculative.enabled())
    print_row("Speculative accept length / rate",
              fmt::format("{:.2f} / {:.1f}% ({} verify passes, {})", accept_length, 100 * acceptance, verifies,
                          spec::spec_algorithm_name(options.scheduler.speculative.algorithm)));
  std::cout.flush();

  if (!options.json_path.empty()) {
    const auto ms = [](const loadgen::Distribution& d) {
      return nlohmann::json{{"mean_ms", d.mean * 1e3},
                            {"p50_ms", d.p50 * 1e3},
                            {"p90_ms", d.p90 * 1e3},
                            {"p99_ms", d.p99 * 1e3},
                            {"max_ms", d.max * 1e3}};
    };
    write_json_report(options.json_path,
                      {{"command_line", command_line()},
                       {"git_revision", git_revision()},
                       {"backend", engine.config().backend},
                       {"device", engine.backend().name()},
                       {"model", model_json(options.model_dir, model)},
                       {"load_format", engine.config().load_format},
                       {"dataset", options.dataset_path},
                       {"num_prompts", num_prompts},
                       {"input_len", w.input_len},
                       {"output_len", w.output_len},
                       {"random_range_ratio", w.range_ratio},
                       {"seed", w.seed},
                       {"max_running_requests", options.scheduler.max_running_requests},
                       {"max_prefill_tokens", options.scheduler.max_prefill_tokens},
                       {"chunked_prefill_size", options.scheduler.chunked_prefill_size},
                       {"prefix_cache", options.scheduler.prefix_cache},
                       {"context_length", engine.context_length()},
                       {"kv_cache_bytes", engine.kv_pool().total_bytes()},
                       {"completed", num_prompts - failed},
                       {"failed", failed},
                       {"short_outputs", short_count},
                       {"duration_s", seconds},
                       {"input_tokens", prompt_tokens},
                       {"cached_tokens", cached_tokens},
                       {"output_tokens", output_tokens},
                       {"expected_output_tokens", asked_tokens},
                       {"request_throughput", completed / seconds},
                       {"input_throughput", prompt_tokens / seconds},
                       {"output_throughput", output_tokens / seconds},
                       {"total_token_throughput", (prompt_tokens + output_tokens) / seconds},
                       {"ttft", ms(ttft_s)},
                       {"latency", ms(latency_s)},
                       {"steps", steps},
                       {"kv_cache_dtype", dtype_name(pool.dtype)},
                       {"kv_cache_tokens", kv_tokens},
                       {"preemptions", preemptions},
                       {"forward_share", step_seconds > 0 ? forward_seconds / step_seconds : 0.0},
                       {"speculative",
                        {{"algorithm", spec::spec_algorithm_name(options.scheduler.speculative.algorithm)},
                         {"num_draft_tokens", options.scheduler.speculative.num_draft_tokens},
                         {"inject_reject_rate", options.scheduler.speculative.inject_reject_rate},
                         {"verify_passes", verifies},
                         {"draft_tokens", drafted},
                         {"accepted_tokens", accepted},
                         {"acceptance_rate", acceptance},
                         {"accept_length", accept_length}}}});
  }
  RS_CHECK(failed == 0, "{} of {} requests failed (first: {})", failed, num_prompts, first_error);
  RS_CHECK(input_tokens == prompt_tokens, "the scheduler counted {} prompt tokens, {} were sent", prompt_tokens,
           input_tokens);
}

}  // namespace

void add_bench_throughput_command(CLI::App& bench) {
  auto options = std::make_shared<ThroughputOptions>();
  CLI::App* cmd = bench.add_subcommand("throughput", "Offline throughput through the in-process scheduler");
  cmd->add_option("--model", options->model_dir, "Checkpoint folder (config.json is enough with --load-format dummy)")
      ->required()
      ->transform(model_folder());
  cmd->add_option("--num-prompts", options->workload.num_prompts, "Requests, all submitted at once")
      ->check(positive_number())
      ->capture_default_str();
  cmd->add_option("--input-len", options->workload.input_len, "Prompt tokens (random ids)")
      ->check(positive_number())
      ->capture_default_str();
  cmd->add_option("--output-len", options->workload.output_len, "Tokens generated per request (EOS ignored)")
      ->check(positive_number())
      ->capture_default_str();
  cmd->add_option("--random-range-ratio", options->workload.range_ratio, "Lengths uniform in [len * (1 - R), len]")
      ->check(number_in(0.0, 1.0))
      ->capture_default_str();
  cmd->add_option("--dataset", options->dataset_path,
                  "JSONL of {\"prompt\": text, \"output_len\": n (optional)}; the first --num-prompts lines")
      ->check(CLI::ExistingFile);
  cmd->add_option("--seed", options->workload.seed, "Seed of the random prompts")->capture_default_str();
  cmd->add_option("--json", options->json_path, "Also write every figure, with the run's context, to this file");
  add_scheduler_options(*cmd, options->scheduler);
  cmd->get_option("--max-running-requests")->description("Sequences in the running batch (default: all, up to 128)");
  add_engine_options(*cmd, options->engine);
  cmd->callback([options, cmd] {
    options->max_running_given = cmd->count("--max-running-requests") > 0;
    run_throughput(*options);
  });
}

}  // namespace rs::app
