// `radixserve bench serve`: an online load generator for any OpenAI-compatible server (as SGLang's bench_serving and
// vLLM's `bench serve`). Streams /v1/completions calls at each concurrency (closed loop) or request rate (Poisson,
// open loop) in turn, from one thread over non-blocking sockets, and reports throughput, TTFT / ITL / TPOT / E2E
// percentiles, goodput under SLOs, the prefix-cache hit rate from the server's usage, errors by kind, and the
// client's own CPU time per request. --json FILE adds every figure with the command line and git revision.
#include <fmt/format.h>

#include <iostream>

#include "apps/radixserve/bench_report.h"
#include "apps/radixserve/bench_serve_report.h"
#include "apps/radixserve/cli_checks.h"
#include "apps/radixserve/commands.h"
#include "base/error.h"
#include "loadgen/workload.h"

namespace rs::app {
namespace {

struct ServeBenchOptions {
  std::string base_url;
  loadgen::RequestOptions request;
  std::vector<int32_t> concurrency;
  std::vector<double> request_rates;
  loadgen::WorkloadConfig workload{.num_prompts = 200, .input_len = 256, .output_len = 128};
  std::string prompt_format = "ids";
  double slo_ttft_ms = 0, slo_itl_ms = 0;
  double timeout_s = 600;
  std::string json_path;
};

ServeLevel run_level(const ServeBenchOptions& options, const loadgen::BaseUrl& url, size_t index) {
  const bool by_rate = !options.request_rates.empty();
  loadgen::WorkloadConfig workload = options.workload;
  workload.seed += index;  // levels differ, yet a rerun (say, with the prefix cache off) sends the same prompts
  const std::vector<loadgen::Prompt> prompts = loadgen::make_prompts(workload);
  std::vector<std::string> requests;
  requests.reserve(prompts.size());
  for (const loadgen::Prompt& prompt : prompts)
    requests.push_back(loadgen::completion_request(url, options.request, prompt));

  ServeLevel level;
  level.label =
      by_rate ? fmt::format("{:g}/s", options.request_rates[index]) : std::to_string(options.concurrency[index]);
  loadgen::LoadOptions load{.timeout_s = options.timeout_s};
  if (by_rate)
    load.arrivals_s = loadgen::poisson_arrivals(workload.num_prompts, options.request_rates[index], workload.seed);
  else
    load.concurrency = options.concurrency[index];
  ProgressLine progress;
  const auto line = [&](const loadgen::LoadProgress& p) {
    return fmt::format("[{} {}] {}/{} done, {} in flight, {} errors, {:.1f} s", by_rate ? "rate" : "concurrency",
                       level.label, p.finished, p.total, p.in_flight, p.errors, p.elapsed_s);
  };
  loadgen::LoadProgress last;
  load.on_progress = [&](const loadgen::LoadProgress& p) {
    last = p;
    progress.update(line(p));
  };
  level.run = loadgen::run_load(url, requests, load);
  progress.finish(line(last));
  for (size_t i = 0; i < prompts.size(); ++i) level.run.results[i].expected_output_tokens = prompts[i].output_len;
  const loadgen::Slo slo{.ttft_s = options.slo_ttft_ms / 1e3, .itl_s = options.slo_itl_ms / 1e3};
  level.summary = loadgen::summarize_run(level.run.results, level.run.duration_s, slo);
  return level;
}

void run_serve_bench(ServeBenchOptions options) {
  const auto url = loadgen::parse_base_url(options.base_url);
  RS_CHECK(url, "--base-url {}: expected http://HOST[:PORT][/PREFIX]", options.base_url);
  RS_CHECK(options.concurrency.empty() != options.request_rates.empty(), "give either --concurrency or --request-rate");
  options.workload.format =
      options.prompt_format == "text" ? loadgen::PromptFormat::kText : loadgen::PromptFormat::kTokenIds;
  RS_CHECK((options.workload.shared_prefix_len > 0) == (options.workload.num_prefixes > 0),
           "--shared-prefix-len and --num-prefixes go together");
  const loadgen::WorkloadConfig& w = options.workload;
  std::cout << fmt::format("bench serve: {} | {} prompts of {}{} {} + up to {} output tokens (range ratio {:g})",
                           options.base_url, w.num_prompts,
                           w.shared_prefix_len > 0
                               ? fmt::format("{} shared ({} prefixes) + ", w.shared_prefix_len, w.num_prefixes)
                               : "",
                           w.input_len, w.format == loadgen::PromptFormat::kText ? "words" : "token ids", w.output_len,
                           w.range_ratio)
            << std::endl;

  const size_t num_levels = std::max(options.concurrency.size(), options.request_rates.size());
  std::vector<ServeLevel> levels;
  for (size_t i = 0; i < num_levels; ++i) levels.push_back(run_level(options, *url, i));
  const bool with_slo = options.slo_ttft_ms > 0 || options.slo_itl_ms > 0;
  print_serve_tables(std::cout, levels, with_slo);
  // A run whose requests failed is a failed benchmark (after its report): scripts must not take it for a measurement.
  int64_t failed = 0, total = 0;
  for (const ServeLevel& level : levels) {
    failed += level.summary.error_count();
    total += static_cast<int64_t>(level.run.results.size());
  }
  const auto check_failures = [&] {
    RS_CHECK(failed == 0, "{} of {} requests failed (errors by kind above)", failed, total);
  };
  if (options.json_path.empty()) return check_failures();

  nlohmann::json level_json = nlohmann::json::array();
  for (const ServeLevel& level : levels) level_json.push_back(serve_level_json(level));
  const nlohmann::json report = {{"command_line", command_line()},
                                 {"git_revision", git_revision()},
                                 {"base_url", options.base_url},
                                 {"model", options.request.model},
                                 {"mode", options.request_rates.empty() ? "concurrency" : "request_rate"},
                                 {"concurrency", options.concurrency},
                                 {"request_rates", options.request_rates},
                                 {"num_prompts", w.num_prompts},
                                 {"input_len", w.input_len},
                                 {"output_len", w.output_len},
                                 {"random_range_ratio", w.range_ratio},
                                 {"shared_prefix_len", w.shared_prefix_len},
                                 {"num_prefixes", w.num_prefixes},
                                 {"prompt_format", options.prompt_format},
                                 {"vocab_size", w.vocab_size},
                                 {"seed", w.seed},
                                 {"slo", {{"ttft_ms", options.slo_ttft_ms}, {"itl_ms", options.slo_itl_ms}}},
                                 {"timeout_s", options.timeout_s},
                                 {"levels", level_json}};
  write_json_report(options.json_path, report);
  check_failures();
}

}  // namespace

void add_bench_serve_command(CLI::App& bench) {
  auto options = std::make_shared<ServeBenchOptions>();
  CLI::App* cmd = bench.add_subcommand("serve", "Load-test a running OpenAI-compatible server (streamed completions)");
  cmd->add_option("--base-url", options->base_url, "The server, http://HOST:PORT (requests go to /v1/completions)")
      ->required();
  cmd->add_option("--model", options->request.model, "The request's 'model' (default: none; radixserve's own)");
  cmd->add_option("--api-key", options->request.api_key, "Sent as 'Authorization: Bearer KEY'");
  auto* concurrency = cmd->add_option("--concurrency", options->concurrency,
                                      "Closed loop: requests in flight, one run per value (e.g. 1,8,64)")
                          ->delimiter(',')
                          ->check(CLI::Range(1, 100000));
  cmd->add_option("--request-rate", options->request_rates,
                  "Open loop: Poisson arrivals at this many requests/s, one run per value")
      ->delimiter(',')
      ->check(positive_number())
      ->excludes(concurrency);
  cmd->add_option("--num-prompts", options->workload.num_prompts, "Requests per run")
      ->check(positive_number())
      ->capture_default_str();
  cmd->add_option("--input-len", options->workload.input_len,
                  "Prompt tokens (words with --prompt-format text) after any shared prefix")
      ->check(positive_number())
      ->capture_default_str();
  cmd->add_option("--output-len", options->workload.output_len, "max_tokens per request (EOS ignored)")
      ->check(positive_number())
      ->capture_default_str();
  cmd->add_option("--random-range-ratio", options->workload.range_ratio, "Lengths uniform in [len * (1 - R), len]")
      ->check(number_in(0.0, 1.0))
      ->capture_default_str();
  cmd->add_option("--shared-prefix-len", options->workload.shared_prefix_len,
                  "Tokens (words) of shared prefixes put before each prompt")
      ->check(non_negative_number());
  cmd->add_option("--num-prefixes", options->workload.num_prefixes, "Shared prefixes, used round robin")
      ->check(non_negative_number());
  cmd->add_option("--prompt-format", options->prompt_format,
                  "ids: prompts as token-id arrays (exact lengths); text: random common words (any server)")
      ->check(CLI::IsMember({"ids", "text"}))
      ->capture_default_str();
  cmd->add_option("--vocab-size", options->workload.vocab_size, "Token ids are drawn from [0, V)")
      ->check(positive_number())
      ->capture_default_str();
  cmd->add_option("--slo-ttft-ms", options->slo_ttft_ms, "Goodput: time to first token at most this")
      ->check(non_negative_number());
  cmd->add_option("--slo-itl-ms", options->slo_itl_ms,
                  "Goodput: mean inter-token latency of the request (TPOT) at most this")
      ->check(non_negative_number());
  cmd->add_option("--timeout", options->timeout_s, "Seconds a request may take before it fails")
      ->check(positive_number())
      ->capture_default_str();
  cmd->add_option("--seed", options->workload.seed, "Seed of prompts and arrivals")->capture_default_str();
  cmd->add_option("--json", options->json_path, "Also write every figure, with the run's context, to this file");
  cmd->callback([options] { run_serve_bench(*options); });
}

}  // namespace rs::app
