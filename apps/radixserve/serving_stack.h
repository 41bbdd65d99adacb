// ServingStack: the engine and the scheduler wired as `serve` runs them (minus HTTP), shared by `serve` and
// `bench throughput` so that the benchmark measures the path users run; plus the scheduler's CLI flags.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <thread>

#include "engine/engine.h"
#include "sched/scheduler.h"

namespace rs::app {

class ServingStack {
 public:
  // Loads the model with its step budget sized for `scheduler_config` (max running requests, prefill tokens, verify
  // passes), and the draft model when speculation asks for one; caps the scheduler's context at what one request may
  // span, and starts the scheduler on its own thread.
  ServingStack(const std::string& model_dir, engine::EngineConfig engine_config,
               sched::SchedulerConfig scheduler_config);
  ~ServingStack();  // stop()
  ServingStack(const ServingStack&) = delete;
  ServingStack& operator=(const ServingStack&) = delete;

  engine::Engine& engine() { return *engine_; }
  sched::Scheduler& scheduler() { return *scheduler_; }
  // Tokens one request may span: the context, and no more than the full-attention pages can hold.
  int64_t max_request_tokens() const { return max_request_tokens_; }
  // Aborts whatever is still queued or running and joins the scheduler thread (idempotent).
  void stop();

 private:
  std::unique_ptr<engine::Engine> engine_;
  int64_t max_request_tokens_ = 0;
  std::unique_ptr<sched::Scheduler> scheduler_;
  std::thread thread_;
};

// --max-running-requests, --max-prefill-tokens, --chunked-prefill-size, --max-queued-requests, --disable-radix-cache,
// and the --speculative-* flags.
void add_scheduler_options(CLI::App& command, sched::SchedulerConfig& config);
void add_speculative_options(CLI::App& command, spec::SpeculativeConfig& config);

}  // namespace rs::app
