// Driver: requests run to completion on the calling thread through a ServingStack, i.e. the path `serve` runs
// (admission, chunked prefill, the radix cache, continuous batching beside other requests, speculative decoding),
// without HTTP or a scheduler thread. `generate`, `bench` and the model goldens use it, so a reference check exercises
// the KV manager and the scheduler as well as the model.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "serving/serving_stack.h"

namespace rs::serving {

// What one request produced.
struct Completion {
  std::vector<int32_t> tokens;  // sampled tokens, a stop token included
  sched::FinishReason finish_reason = sched::FinishReason::kNone;
  std::string error;                                  // with kError
  int32_t cached_tokens = 0;                          // prompt tokens the prefix cache served
  double first_token_seconds = 0, total_seconds = 0;  // from the first step after submit()
  spec::SpecTotals speculative;
  // With DriverOptions::keep_logits: the raw logits of every row sampled for this request, in order (one per token
  // without speculation: logits[i] gave tokens[i]); empty otherwise.
  std::vector<std::vector<float>> logits;
  std::vector<float> embedding;  // an embedding request's pooled embedding (Request::embed)
};

struct DriverOptions {
  bool keep_logits = false;  // copy each sampled row's logits into its Completion (tests; costs a copy per step)
};

class Driver {
 public:
  Driver(const std::string& model_dir, engine::EngineConfig engine_config, sched::SchedulerConfig scheduler_config,
         DriverOptions options = {});

  engine::Engine& engine() { return stack_.engine(); }
  ServingStack& stack() { return stack_; }

  // Queues a request (the driver sets its id and stream); returns its index for result(). Requests submitted before
  // run() share its steps.
  size_t submit(std::unique_ptr<sched::Request> request);
  size_t submit(std::vector<int32_t> prompt, const engine::SamplingParams& sampling, int32_t max_new_tokens,
                std::vector<int32_t> stop_token_ids = {});
  // Steps the scheduler until every submitted request has finished.
  void run();
  const Completion& result(size_t index) const { return completions_.at(index); }
  // submit() then run(): one request alone.
  const Completion& generate(std::vector<int32_t> prompt, const engine::SamplingParams& sampling,
                             int32_t max_new_tokens, std::vector<int32_t> stop_token_ids = {});

 private:
  void record_logits(const engine::ForwardBatch& batch, const engine::StepOutput& output);
  // Moves the events of every unfinished request into its Completion; returns how many finished.
  size_t collect(double elapsed_seconds);

  struct Pending {
    size_t index;
    std::shared_ptr<sched::TokenStream> stream;
  };
  DriverOptions options_;
  std::vector<Completion> completions_;
  std::vector<Pending> pending_;
  // Sampling rows name their request by its SamplingParams (stable while the request lives): which completion.
  std::unordered_map<const engine::SamplingParams*, size_t> row_owner_;
  uint64_t next_id_ = 1;
  ServingStack stack_;  // last: its observer writes into the members above
};

}  // namespace rs::serving
