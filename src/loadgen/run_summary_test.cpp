#include "loadgen/run_summary.h"

#include <gtest/gtest.h>

namespace rs::loadgen {
namespace {

// A completed request: TTFT `ttft`, then `tokens - 1` chunks `gap` apart.
RequestResult completed(double start, double ttft, double gap, int tokens, int prompt = 100, int cached = 0) {
  RequestResult r;
  r.start_s = start;
  r.ttft_s = ttft;
  r.itl_s.assign(tokens - 1, gap);
  r.latency_s = ttft + gap * (tokens - 1);
  r.prompt_tokens = prompt;
  r.completion_tokens = tokens;
  r.cached_tokens = cached;
  r.expected_output_tokens = tokens;
  return r;
}

TEST(RunSummary, SpeculativeAcceptLengthOverCompletedRequests) {
  std::vector<RequestResult> results = {completed(0, 0.1, 0.01, 11), completed(0, 0.1, 0.01, 11)};
  results[0].spec_verify_steps = 4, results[0].spec_accepted_tokens = 6;
  results[1].spec_verify_steps = 6, results[1].spec_accepted_tokens = 9;
  RequestResult failed;
  failed.error = ErrorKind::kTimeout;
  failed.spec_verify_steps = 100;  // not counted
  results.push_back(failed);
  const RunSummary s = summarize_run(results, 1.0, Slo{});
  EXPECT_EQ(s.spec_verify_steps, 10);
  EXPECT_EQ(s.spec_accepted_tokens, 15);
  EXPECT_DOUBLE_EQ(s.spec_accept_length, 2.5);
  EXPECT_DOUBLE_EQ(summarize_run({completed(0, 0.1, 0.01, 3)}, 1.0, Slo{}).spec_accept_length, 0.0);
}

TEST(RunSummary, ThroughputLatenciesAndHitRate) {
  std::vector<RequestResult> results = {completed(0, 0.1, 0.01, 11, 100, 0), completed(0, 0.3, 0.03, 11, 100, 64)};
  RequestResult refused;
  refused.error = ErrorKind::kHttpStatus;
  refused.http_status = 503;
  results.push_back(refused);
  RequestResult timed_out;
  timed_out.error = ErrorKind::kTimeout;
  results.push_back(timed_out);

  const RunSummary s = summarize_run(results, 2.0, Slo{});
  EXPECT_EQ(s.requests, 4);
  EXPECT_EQ(s.completed, 2);
  EXPECT_EQ(s.error_count(), 2);
  EXPECT_EQ(s.errors[static_cast<int>(ErrorKind::kHttpStatus)], 1);
  EXPECT_EQ(s.errors[static_cast<int>(ErrorKind::kTimeout)], 1);
  EXPECT_EQ(s.http_statuses.at(503), 1);
  EXPECT_EQ(s.prompt_tokens, 200);
  EXPECT_EQ(s.completion_tokens, 22);
  EXPECT_DOUBLE_EQ(s.request_throughput, 1.0);
  EXPECT_DOUBLE_EQ(s.input_throughput, 100.0);
  EXPECT_DOUBLE_EQ(s.output_throughput, 11.0);
  EXPECT_DOUBLE_EQ(s.cache_hit_rate, 0.32);
  EXPECT_NEAR(s.ttft_s.mean, 0.2, 1e-12);
  EXPECT_NEAR(s.ttft_s.p50, 0.2, 1e-12);
  EXPECT_NEAR(s.ttft_s.p99, 0.298, 1e-12);
  EXPECT_EQ(s.itl_s.count, 20u);
  EXPECT_NEAR(s.itl_s.mean, 0.02, 1e-12);
  EXPECT_NEAR(s.itl_s.p90, 0.03, 1e-12);
  EXPECT_NEAR(s.tpot_s.mean, 0.02, 1e-12);
  EXPECT_NEAR(s.e2e_latency_s.max, 0.6, 1e-12);
  EXPECT_EQ(s.good_requests, 2);  // no objectives: every completed request counts
  EXPECT_DOUBLE_EQ(s.goodput, 1.0);
}

TEST(RunSummary, GoodputCountsOnlyRequestsWithinEveryObjective) {
  const std::vector<RequestResult> results = {
      completed(0, 0.0625, 0.0078125, 21),  // good (binary fractions: the edge case below is exact)
      completed(0, 0.5, 0.0078125, 21),     // TTFT too slow
      completed(0, 0.0625, 0.03125, 21),    // TPOT too slow
      completed(0, 0.125, 0.015625, 21),    // exactly on both objectives: good
  };
  const Slo slo{.ttft_s = 0.125, .itl_s = 0.015625};
  EXPECT_TRUE(meets_slo(results[0], slo));
  EXPECT_FALSE(meets_slo(results[1], slo));
  EXPECT_FALSE(meets_slo(results[2], slo));
  EXPECT_EQ(time_per_output_token(results[3]), 0.015625);
  const RunSummary s = summarize_run(results, 4.0, slo);
  EXPECT_EQ(s.good_requests, 2);
  EXPECT_DOUBLE_EQ(s.goodput, 0.5);
  EXPECT_EQ(summarize_run(results, 4.0, Slo{.ttft_s = 0.125}).good_requests, 3);
  EXPECT_EQ(summarize_run(results, 4.0, Slo{.itl_s = 0.015625}).good_requests, 3);
}

TEST(RunSummary, SingleTokenRequestsHaveNoTpot) {
  const RunSummary s = summarize_run({completed(0, 0.1, 0, 1)}, 1.0, Slo{.itl_s = 0.001});
  EXPECT_EQ(s.tpot_s.count, 0u);
  EXPECT_EQ(s.itl_s.count, 0u);
  EXPECT_EQ(s.good_requests, 1);
}

}  // namespace
}  // namespace rs::loadgen
