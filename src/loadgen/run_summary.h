// RunSummary: the figures of one load level (a concurrency or a request rate) from its requests' results: throughput,
// latency distributions, goodput under service-level objectives, prefix-cache hit rate, and errors by kind.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <vector>

#include "loadgen/latency_stats.h"
#include "loadgen/request_result.h"

namespace rs::loadgen {

// A request meets the objectives when its TTFT and its TPOT (mean gap between its output tokens after the first,
// (latency - TTFT) / (completion_tokens - 1), as vLLM's goodput measures inter-token latency) are within them.
struct Slo {
  double ttft_s = 0;  // 0: no TTFT objective
  double itl_s = 0;   // 0: no inter-token objective
  bool any() const { return ttft_s > 0 || itl_s > 0; }
};

struct RunSummary {
  int64_t requests = 0;
  int64_t completed = 0;                         // ended without error
  std::array<int64_t, kNumErrorKinds> errors{};  // by ErrorKind
  std::map<int, int64_t> http_statuses;          // status -> count, for kHttpStatus errors
  int64_t prompt_tokens = 0;                     // of completed requests, from usage
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;
  int64_t expected_completion_tokens = 0;  // max_tokens asked of completed requests
  int64_t good_requests = 0;               // completed and within the SLO (all completed when there is none)
  double duration_s = 0;                   // first send to last answer
  double request_throughput = 0;           // completed / s
  double input_throughput = 0;             // prompt tokens / s
  double output_throughput = 0;            // completion tokens / s
  double goodput = 0;                      // good requests / s
  double cache_hit_rate = 0;               // cached / prompt tokens
  int64_t spec_verify_steps = 0;           // speculative decoding, from usage.speculative
  int64_t spec_accepted_tokens = 0;
  double spec_accept_length = 0;  // tokens per verify pass: 1 + accepted / verify steps (0: no speculation reported)
  Distribution ttft_s, itl_s, tpot_s, e2e_latency_s;

  int64_t error_count() const { return requests - completed; }
};

// TPOT of one completed request (0 with fewer than two output tokens).
double time_per_output_token(const RequestResult& result);
bool meets_slo(const RequestResult& result, const Slo& slo);

// Summarises the results of one level that took `duration_s` seconds.
RunSummary summarize_run(const std::vector<RequestResult>& results, double duration_s, const Slo& slo);

}  // namespace rs::loadgen
