// What routers and gateways read to balance a fleet of replicas (issue 40): the scheduler's load summarized once
// (running and waiting requests, KV pages held by requests apart from those only the prefix cache keeps, the prefix
// cache's hit rate), rendered under vLLM's and SGLang's metric names, and the process_* metrics every Prometheus client
// library exports.
#pragma once

#include <cstdint>
#include <string>

#include "sched/scheduler.h"

namespace rs::server {

struct LoadSummary {
  int32_t running = 0, waiting = 0;
  // Full-attention KV groups (all groups for a model without one), in pages: what bounds how many tokens fit.
  int64_t total_pages = 0;
  int64_t request_pages = 0;  // held by running requests (whether or not the prefix cache also holds them)
  int64_t cached_pages = 0;   // held by the prefix cache
  double token_usage = 0;     // request_pages / total_pages: what a router balances on (0 when idle, however warm)
  double cache_hit_rate = 0;  // prompt tokens served from the prefix cache / prompt tokens, since start
};
LoadSummary summarize_load(const sched::SchedulerStats& stats);

// vllm:num_requests_running, vllm:num_requests_waiting, vllm:kv_cache_usage_perc (and the older
// vllm:gpu_cache_usage_perc), vllm:prefix_cache_queries_total / _hits_total, vllm:lora_requests_info (no adapters),
// vllm:num_preemptions_total, vllm:prompt_tokens_total, vllm:generation_tokens_total; sglang:num_running_reqs,
// sglang:num_queue_reqs, sglang:token_usage, sglang:cache_hit_rate; radixserve_kv_pages_requests. `model_label`:
// model_name="..." or empty.
void render_router_metrics(const sched::SchedulerStats& stats, const std::string& model_label, std::string& out);

// process_cpu_seconds_total, process_resident_memory_bytes, process_virtual_memory_bytes, process_open_fds,
// process_max_fds, process_start_time_seconds (Linux /proc; nothing elsewhere).
void render_process_metrics(std::string& out);

}  // namespace rs::server
