// ServingStack: the engine, the drafter and the scheduler wired as `serve` runs them (minus HTTP), shared by `serve`,
// `bench throughput` and the synchronous Driver (`generate`, `bench`, the model goldens), so that every one of them
// runs the path users run.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "engine/engine.h"
#include "sched/scheduler.h"

namespace rs::serving {

struct StackOptions {
  // The scheduler runs on a thread of its own (serve, bench throughput); false: the caller steps it (Driver).
  bool scheduler_thread = true;
  // Called on the scheduler's thread after every step is sampled with the step's batch and output; the engine then
  // keeps each step's logits (StepOutput::logits, [logit rows, vocab]) for it. Empty: none (no logits copied back).
  std::function<void(const engine::ForwardBatch&, const engine::StepOutput&)> step_observer;
};

// DFlash: num_draft_tokens becomes the drafter's block size - 1 (a different given value is an error); other
// algorithms keep theirs. ServingStack calls it; callers that report the draft length call it first.
void resolve_draft_tokens(spec::SpeculativeConfig& spec);

class ServingStack {
 public:
  // Loads the model with its step budget sized for `scheduler_config` (max running requests, prefill tokens, verify
  // passes), and the draft model when speculation asks for one; caps the scheduler's context at what one request may
  // span, and starts the scheduler on its own thread (unless options say the caller steps it).
  ServingStack(const std::string& model_dir, engine::EngineConfig engine_config,
               sched::SchedulerConfig scheduler_config, StackOptions options = {});
  ~ServingStack();  // stop()
  ServingStack(const ServingStack&) = delete;
  ServingStack& operator=(const ServingStack&) = delete;

  engine::Engine& engine() { return *engine_; }
  sched::Scheduler& scheduler() { return *scheduler_; }
  // Tokens one request may span: the context, and no more than the full-attention pages can hold.
  int64_t max_request_tokens() const { return max_request_tokens_; }
  // Aborts whatever is still queued or running and joins the scheduler thread (idempotent).
  void stop();
  // Without a scheduler thread: one scheduler iteration on the calling thread (Scheduler::step).
  bool step();

 private:
  std::unique_ptr<engine::Engine> engine_;
  int64_t max_request_tokens_ = 0;
  // The scheduler's two phases on the engine (sched::StepFunctions): the step launched and not yet sampled.
  engine::StepHandle launched_;
  std::function<void(const engine::ForwardBatch&, const engine::StepOutput&)> observe_;
  std::unique_ptr<sched::Scheduler> scheduler_;
  std::thread thread_;
};

}  // namespace rs::serving
