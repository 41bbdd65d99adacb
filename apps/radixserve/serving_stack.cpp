// The engine + scheduler pair of `serve` and `bench throughput` (see serving_stack.h).
#include "apps/radixserve/serving_stack.h"

#include <algorithm>

namespace rs::app {
namespace {

int64_t request_token_limit(const engine::Engine& engine, const kv::KvPoolConfig& pool) {
  int64_t limit = engine.context_length();
  for (const kv::KvGroup& group : pool.groups)
    if (group.window == 0) limit = std::min(limit, group.num_pages * pool.page_size);
  return limit;
}

}  // namespace

ServingStack::ServingStack(const std::string& model_dir, engine::EngineConfig engine_config,
                           sched::SchedulerConfig scheduler_config) {
  engine_config.max_running_requests = scheduler_config.max_running_requests;
  engine_config.max_step_tokens = scheduler_config.max_prefill_tokens + scheduler_config.max_running_requests;
  engine_ = std::make_unique<engine::Engine>(model_dir, engine_config);
  const kv::KvPoolConfig& pool = engine_->kv_pool().config();
  max_request_tokens_ = request_token_limit(*engine_, pool);
  scheduler_config.context_length = max_request_tokens_;
  scheduler_config.num_state_slots = engine_->state_pool().num_slots();
  scheduler_config.vocab_size = static_cast<int32_t>(engine_->model_config().vocab_size);
  scheduler_ = std::make_unique<sched::Scheduler>(
      scheduler_config, pool,
      [engine = engine_.get()](const engine::ForwardBatch& batch) { return engine->forward(batch); });
  thread_ = std::thread([scheduler = scheduler_.get()] { scheduler->run(); });
}

ServingStack::~ServingStack() { stop(); }

void ServingStack::stop() {
  if (!thread_.joinable()) return;
  scheduler_->stop();
  thread_.join();
}

void add_scheduler_options(CLI::App& cmd, sched::SchedulerConfig& config) {
  cmd.add_option("--max-running-requests", config.max_running_requests, "Sequences in the running batch")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  cmd.add_option("--max-prefill-tokens", config.max_prefill_tokens, "Prefill tokens per step")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd.add_option("--chunked-prefill-size", config.chunked_prefill_size, "Prefill tokens of one request per step")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd.add_option("--max-queued-requests", config.max_queued_requests,
                 "Requests waiting for admission before new ones get 503")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  cmd.add_flag_callback(
      "--disable-radix-cache", [&config] { config.prefix_cache = false; },
      "Reuse no cached prompt prefix: every prompt is prefilled in full (for A/B runs of the prefix cache)");
}

}  // namespace rs::app
