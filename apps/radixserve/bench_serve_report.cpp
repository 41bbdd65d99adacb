// Tables and JSON of `bench serve` (see bench_serve_report.h).
#include "apps/radixserve/bench_serve_report.h"

#include <fmt/format.h>

#include <ostream>

namespace rs::app {
namespace {

nlohmann::json distribution_ms(const loadgen::Distribution& d) {
  return {{"count", d.count},      {"mean_ms", d.mean * 1e3}, {"p50_ms", d.p50 * 1e3},
          {"p90_ms", d.p90 * 1e3}, {"p99_ms", d.p99 * 1e3},   {"max_ms", d.max * 1e3}};
}

double cpu_ms_per_request(const ServeLevel& level) {
  return level.summary.requests > 0 ? level.run.cpu_s * 1e3 / level.summary.requests : 0.0;
}

}  // namespace

void print_serve_tables(std::ostream& out, const std::vector<ServeLevel>& levels, bool with_slo) {
  out << fmt::format("{:>8} {:>6} {:>6} {:>8} {:>8} {:>10} {:>10} {:>10} {:>9} {:>11} {:>10}\n", "level", "done",
                     "errors", "time s", "req/s", "in tok/s", "out tok/s", with_slo ? "goodput/s" : "total tok/s",
                     "cache hit", "out tokens", "cpu ms/req");
  for (const ServeLevel& level : levels) {
    const loadgen::RunSummary& s = level.summary;
    const double last = with_slo ? s.goodput : s.input_throughput + s.output_throughput;
    out << fmt::format("{:>8} {:>6} {:>6} {:>8.2f} {:>8.2f} {:>10.1f} {:>10.1f} {:>10.2f} {:>8.1f}% {:>11} {:>10.3f}\n",
                       level.label, s.completed, s.error_count(), s.duration_s, s.request_throughput,
                       s.input_throughput, s.output_throughput, last, s.cache_hit_rate * 100,
                       fmt::format("{}/{}", s.completion_tokens, s.expected_completion_tokens),
                       cpu_ms_per_request(level));
  }
  out << fmt::format("\n{:>8} | {:>25} | {:>25} | {:>9} | {:>17}\n", "ms", "TTFT mean / p50 / p99",
                     "ITL mean / p50 / p99", "TPOT mean", "E2E mean / p99");
  for (const ServeLevel& level : levels) {
    const loadgen::RunSummary& s = level.summary;
    out << fmt::format(
        "{:>8} | {:>7.1f} {:>8.1f} {:>8.1f} | {:>7.2f} {:>8.2f} {:>8.2f} | {:>9.2f} | {:>8.0f} {:>8.0f}\n", level.label,
        s.ttft_s.mean * 1e3, s.ttft_s.p50 * 1e3, s.ttft_s.p99 * 1e3, s.itl_s.mean * 1e3, s.itl_s.p50 * 1e3,
        s.itl_s.p99 * 1e3, s.tpot_s.mean * 1e3, s.e2e_latency_s.mean * 1e3, s.e2e_latency_s.p99 * 1e3);
  }
  for (const ServeLevel& level : levels) {
    if (level.summary.error_count() == 0) continue;
    out << fmt::format("\nlevel {}: {} errors:", level.label, level.summary.error_count());
    for (int k = 1; k < loadgen::kNumErrorKinds; ++k)
      if (level.summary.errors[k] > 0)
        out << fmt::format(" {} {}", loadgen::error_kind_name(static_cast<loadgen::ErrorKind>(k)),
                           level.summary.errors[k]);
    for (const auto& result : level.run.results)
      if (!result.ok()) {
        out << "\n  first: " << result.error_detail;
        break;
      }
    out << '\n';
  }
  out.flush();
}

nlohmann::json serve_level_json(const ServeLevel& level) {
  const loadgen::RunSummary& s = level.summary;
  nlohmann::json errors = nlohmann::json::object(), statuses = nlohmann::json::object(),
                 examples = nlohmann::json::array();
  for (int k = 1; k < loadgen::kNumErrorKinds; ++k)
    errors[std::string(loadgen::error_kind_name(static_cast<loadgen::ErrorKind>(k)))] = s.errors[k];
  for (const auto& [status, count] : s.http_statuses) statuses[std::to_string(status)] = count;
  for (const auto& result : level.run.results)
    if (!result.ok() && examples.size() < 5)
      examples.push_back({{"kind", loadgen::error_kind_name(result.error)}, {"detail", result.error_detail}});
  return {{"level", level.label},
          {"requests", s.requests},
          {"completed", s.completed},
          {"errors", errors},
          {"http_statuses", statuses},
          {"error_examples", examples},
          {"duration_s", s.duration_s},
          {"prompt_tokens", s.prompt_tokens},
          {"completion_tokens", s.completion_tokens},
          {"expected_completion_tokens", s.expected_completion_tokens},
          {"cached_tokens", s.cached_tokens},
          {"cache_hit_rate", s.cache_hit_rate},
          {"spec_verify_steps", s.spec_verify_steps},
          {"spec_accepted_tokens", s.spec_accepted_tokens},
          {"spec_accept_length", s.spec_accept_length},
          {"request_throughput", s.request_throughput},
          {"input_throughput", s.input_throughput},
          {"output_throughput", s.output_throughput},
          {"total_token_throughput", s.input_throughput + s.output_throughput},
          {"good_requests", s.good_requests},
          {"goodput", s.goodput},
          {"ttft", distribution_ms(s.ttft_s)},
          {"itl", distribution_ms(s.itl_s)},
          {"tpot", distribution_ms(s.tpot_s)},
          {"e2e_latency", distribution_ms(s.e2e_latency_s)},
          {"max_in_flight", level.run.max_in_flight},
          {"connections_opened", level.run.connections_opened},
          {"client_cpu_s", level.run.cpu_s},
          {"client_cpu_ms_per_request", cpu_ms_per_request(level)}};
}

}  // namespace rs::app
