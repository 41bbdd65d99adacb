#include "loadgen/run_summary.h"

namespace rs::loadgen {

double time_per_output_token(const RequestResult& result) {
  if (result.completion_tokens < 2 || result.ttft_s < 0) return 0.0;
  return (result.latency_s - result.ttft_s) / static_cast<double>(result.completion_tokens - 1);
}

bool meets_slo(const RequestResult& result, const Slo& slo) {
  if (!result.ok()) return false;
  if (slo.ttft_s > 0 && !(result.ttft_s >= 0 && result.ttft_s <= slo.ttft_s)) return false;
  if (slo.itl_s > 0 && time_per_output_token(result) > slo.itl_s) return false;
  return true;
}

RunSummary summarize_run(const std::vector<RequestResult>& results, double duration_s, const Slo& slo) {
  RunSummary s;
  s.requests = static_cast<int64_t>(results.size());
  s.duration_s = duration_s;
  std::vector<double> ttft, itl, tpot, e2e;
  for (const RequestResult& r : results) {
    if (!r.ok()) {
      ++s.errors[static_cast<int>(r.error)];
      if (r.error == ErrorKind::kHttpStatus) ++s.http_statuses[r.http_status];
      continue;
    }
    ++s.completed;
    s.prompt_tokens += r.prompt_tokens;
    s.completion_tokens += r.completion_tokens;
    s.cached_tokens += r.cached_tokens;
    s.spec_verify_steps += r.spec_verify_steps;
    s.spec_accepted_tokens += r.spec_accepted_tokens;
    s.expected_completion_tokens += r.expected_output_tokens;
    if (meets_slo(r, slo)) ++s.good_requests;
    if (r.ttft_s >= 0) ttft.push_back(r.ttft_s);
    itl.insert(itl.end(), r.itl_s.begin(), r.itl_s.end());
    if (r.completion_tokens >= 2) tpot.push_back(time_per_output_token(r));
    e2e.push_back(r.latency_s);
  }
  if (duration_s > 0) {
    s.request_throughput = s.completed / duration_s;
    s.input_throughput = s.prompt_tokens / duration_s;
    s.output_throughput = s.completion_tokens / duration_s;
    s.goodput = s.good_requests / duration_s;
  }
  s.cache_hit_rate = s.prompt_tokens > 0 ? static_cast<double>(s.cached_tokens) / s.prompt_tokens : 0.0;
  s.spec_accept_length =
      s.spec_verify_steps > 0 ? 1.0 + static_cast<double>(s.spec_accepted_tokens) / s.spec_verify_steps : 0.0;
  s.ttft_s = summarize(std::move(ttft));
  s.itl_s = summarize(std::move(itl));
  s.tpot_s = summarize(std::move(tpot));
  s.e2e_latency_s = summarize(std::move(e2e));
  return s;
}

}  // namespace rs::loadgen
