// SingleSequence: runs one sequence through an Engine without a scheduler (CLI generate, benchmarks, golden tests).
// Full-attention groups map page p to page p; sliding-window groups use a ring of their pages and leave pages no
// token of the step can see absent, exactly the reclaiming the scheduler does. Recurrent state lives in slot 0.
#pragma once

#include <span>
#include <vector>

#include "engine/engine.h"

namespace rs::engine {

class SingleSequence {
 public:
  explicit SingleSequence(Engine& engine);

  // Appends `ids` at the next positions (one step; split long prompts with max_chunk) and returns the sampled token
  // (and, with keep_logits, the raw logits of the last position in `logits`).
  SampledToken feed(std::span<const int32_t> ids, const SamplingRow& sampling, std::vector<float>* logits = nullptr);
  // Prefill in chunks of at most `max_chunk` tokens; returns the token sampled after the last one.
  SampledToken prefill(std::span<const int32_t> ids, const SamplingRow& sampling, int32_t max_chunk,
                       std::vector<float>* logits = nullptr);
  int32_t length() const { return length_; }

 private:
  Engine& engine_;
  int32_t length_ = 0;
  int32_t max_pages_ = 0;
};

}  // namespace rs::engine
