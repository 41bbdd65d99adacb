#include "server/metrics.h"

#include <gtest/gtest.h>

#include "server/router_metrics.h"

namespace rs::server {
namespace {

TEST(Histogram, RendersCumulativeBuckets) {
  Histogram histogram({0.1, 1.0});
  histogram.observe(0.05);
  histogram.observe(0.5);
  histogram.observe(5.0);
  std::string out;
  histogram.render("x_seconds", "help", out);
  EXPECT_NE(out.find("# TYPE x_seconds histogram"), std::string::npos);
  EXPECT_NE(out.find("x_seconds_bucket{le=\"0.1\"} 1\n"), std::string::npos);
  EXPECT_NE(out.find("x_seconds_bucket{le=\"1\"} 2\n"), std::string::npos);
  EXPECT_NE(out.find("x_seconds_bucket{le=\"+Inf\"} 3\n"), std::string::npos);
  EXPECT_NE(out.find("x_seconds_count 3\n"), std::string::npos);
}

TEST(ServerMetrics, RendersSchedulerStatsPerKvGroup) {
  ServerMetrics metrics;
  sched::SchedulerStats stats;
  stats.num_running = 2;
  stats.kv = {{.window = 0, .num_pages = 10, .used_pages = 4, .cached_pages = 3},
              {.window = 128, .num_pages = 6, .used_pages = 1, .cached_pages = 0}};
  stats.prompt_tokens = 100;
  stats.cached_prompt_tokens = 25;
  const std::string out = metrics.render(stats, 16);
  EXPECT_NE(out.find("radixserve_num_requests_running 2\n"), std::string::npos);
  EXPECT_NE(out.find("radixserve_kv_pages_used{group=\"0\",window=\"0\"} 4\n"), std::string::npos);
  EXPECT_NE(out.find("radixserve_kv_pages_free{group=\"1\",window=\"128\"} 5\n"), std::string::npos);
  EXPECT_NE(out.find("radixserve_prefix_cache_hit_rate 0.25\n"), std::string::npos);
  EXPECT_NE(out.find("radixserve_time_to_first_token_seconds_count 0\n"), std::string::npos);
}

// Routers read load under vLLM's and SGLang's names: KV usage counts the pages requests hold in full-attention
// groups, not those only the prefix cache keeps (a warm idle replica reads as empty), and not window groups.
TEST(ServerMetrics, RendersTheLoadUnderTheNamesRoutersRead) {
  ServerMetrics metrics;
  sched::SchedulerStats stats;
  stats.num_running = 3;
  stats.num_queued = 5;
  stats.kv = {{.window = 0, .num_pages = 100, .used_pages = 40, .cached_pages = 30, .evictable_pages = 15},
              {.window = 128, .num_pages = 50, .used_pages = 50, .cached_pages = 0}};
  stats.prompt_tokens = 200;
  stats.cached_prompt_tokens = 50;
  stats.preemptions = 7;
  const std::string out = metrics.render(stats, 16, "m");
  for (const char* line :
       {"vllm:num_requests_running{model_name=\"m\"} 3\n", "vllm:num_requests_waiting{model_name=\"m\"} 5\n",
        "vllm:kv_cache_usage_perc{model_name=\"m\"} 0.25\n", "vllm:gpu_cache_usage_perc{model_name=\"m\"} 0.25\n",
        "vllm:prefix_cache_queries_total{model_name=\"m\"} 200\n",
        "vllm:prefix_cache_hits_total{model_name=\"m\"} 50\n", "vllm:num_preemptions_total{model_name=\"m\"} 7\n",
        "vllm:lora_requests_info{model_name=\"m\",max_lora=\"0\",running_lora_adapters=\"\",waiting_lora_adapters=\"\"}"
        " ",
        "sglang:num_running_reqs{model_name=\"m\"} 3\n", "sglang:num_queue_reqs{model_name=\"m\"} 5\n",
        "sglang:token_usage{model_name=\"m\"} 0.25\n", "sglang:cache_hit_rate{model_name=\"m\"} 0.25\n",
        "radixserve_kv_pages_requests{model_name=\"m\"} 25\n", "# TYPE process_cpu_seconds_total counter\n",
        "process_resident_memory_bytes ", "process_open_fds ", "process_start_time_seconds "})
    EXPECT_NE(out.find(line), std::string::npos) << line;
  const LoadSummary load = summarize_load(stats);
  EXPECT_EQ(load.request_pages, 25);
  EXPECT_EQ(load.cached_pages, 30);
  EXPECT_EQ(load.total_pages, 100);
}

TEST(ServerMetrics, RendersSpeculativeDecodingTotals) {
  ServerMetrics metrics;
  sched::SchedulerStats stats;
  EXPECT_NE(metrics.render(stats, 16).find("radixserve_spec_accept_length 0\n"), std::string::npos);
  stats.spec_verifies = 10;
  stats.spec_draft_tokens = 40;
  stats.spec_accepted_tokens = 25;
  stats.spec_draft_calls = 4;
  stats.spec_draft_seconds = 0.5;
  stats.spec_verify_steps = 3;
  stats.spec_verify_step_seconds = 0.25;
  const std::string out = metrics.render(stats, 16);
  EXPECT_NE(out.find("radixserve_spec_draft_calls_total 4\n"), std::string::npos);
  EXPECT_NE(out.find("radixserve_spec_draft_seconds_total 0.5\n"), std::string::npos);
  EXPECT_NE(out.find("radixserve_spec_verify_steps_total 3\n"), std::string::npos);
  EXPECT_NE(out.find("radixserve_spec_verify_step_seconds_total 0.25\n"), std::string::npos);
  EXPECT_NE(out.find("radixserve_spec_verifies_total 10\n"), std::string::npos);
  EXPECT_NE(out.find("radixserve_spec_draft_tokens_total 40\n"), std::string::npos);
  EXPECT_NE(out.find("radixserve_spec_accepted_tokens_total 25\n"), std::string::npos);
  EXPECT_NE(out.find("radixserve_spec_accept_length 3.5\n"), std::string::npos);
}

TEST(ServerMetrics, EverySeriesCarriesTheModelNameAnd4xxAreCountedByStatus) {
  ServerMetrics metrics;
  metrics.count_client_error(400);
  metrics.count_client_error(400);
  metrics.count_client_error(413);
  metrics.requests_rejected++;
  metrics.time_to_first_token.observe(0.2);
  metrics.queue_time.observe(0.03);
  sched::SchedulerStats stats;
  stats.kv = {{.window = 0, .num_pages = 10, .used_pages = 4, .cached_pages = 3}};
  const std::string out = metrics.render(stats, 16, "qwen");
  size_t series = 0;
  for (size_t begin = 0, end; (end = out.find('\n', begin)) != std::string::npos; begin = end + 1) {
    const std::string line = out.substr(begin, end - begin);
    if (line.empty() || line[0] == '#' || line.rfind("process_", 0) == 0) continue;  // process_*: the process's own
    ++series;
    EXPECT_NE(line.find("{model_name=\"qwen\""), std::string::npos) << line;
  }
  EXPECT_GT(series, 40u);
  EXPECT_NE(out.find("radixserve_client_errors_total{model_name=\"qwen\",status=\"400\"} 2\n"), std::string::npos);
  EXPECT_NE(out.find("radixserve_client_errors_total{model_name=\"qwen\",status=\"413\"} 1\n"), std::string::npos);
  EXPECT_NE(out.find("radixserve_requests_total{model_name=\"qwen\",outcome=\"client_error\"} 3\n"), std::string::npos);
  EXPECT_NE(out.find("radixserve_requests_total{model_name=\"qwen\",outcome=\"rejected\"} 1\n"), std::string::npos);
  EXPECT_NE(out.find("radixserve_requests_total{model_name=\"qwen\",outcome=\"server_error\"} 0\n"), std::string::npos);
  EXPECT_NE(out.find("radixserve_time_to_first_token_seconds_bucket{model_name=\"qwen\",le=\"0.25\"} 1\n"),
            std::string::npos);
  EXPECT_NE(out.find("radixserve_request_queue_time_seconds_count{model_name=\"qwen\"} 1\n"), std::string::npos);
}

}  // namespace
}  // namespace rs::server
