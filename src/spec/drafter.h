// Drafter: proposes the next tokens of running sequences for the target model to verify in one pass (speculative
// decoding). Called on the scheduler thread only, once per step, for every sequence that drafts in that step.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace rs::spec {

struct DraftRequest {
  uint64_t id = 0;                  // the request's id: stable while it lives (drafters may keep state under it)
  std::span<const int32_t> tokens;  // its committed tokens (prompt, then output); the draft continues them
  int32_t max_tokens = 0;           // propose at most this many
  std::vector<int32_t> draft;       // out: the proposal (may be empty: nothing worth verifying)
};

class Drafter {
 public:
  virtual ~Drafter() = default;
  // Fills each request's draft. Drafts must be deterministic functions of the tokens (greedy): verification then
  // samples the target at every drafted position and keeps the draft while it agrees, which is exact rejection
  // sampling for a point-mass proposal, so the output distribution (and, with a seed, the output) is the target's.
  virtual void propose(std::span<DraftRequest> requests) = 0;
  // The request ended or was preempted: drop whatever is kept for it.
  virtual void release(uint64_t /*id*/) {}
};

}  // namespace rs::spec
