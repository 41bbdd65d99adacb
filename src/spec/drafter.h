// Drafter: proposes the next tokens of running sequences for the target model to verify in one pass (speculative
// decoding). Called on the scheduler thread only, once per step, for every sequence that drafts in that step.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

namespace rs::spec {

struct DraftRequest {
  uint64_t id = 0;                  // the request's id: stable while it lives (drafters may keep state under it)
  std::span<const int32_t> tokens;  // its committed tokens (prompt, then output); the draft continues them
  int32_t max_tokens = 0;           // propose at most this many
  // EAGLE-3: the target's KV pages (of its feature group) holding the request's positions: position p's features
  // are row page * page_size + p % page_size of the target's feature cache. Empty for other drafters.
  std::span<const int32_t> feature_pages;
  std::vector<int32_t> draft;  // out: the proposal (may be empty: nothing worth verifying)
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

// Benchmarks only: wraps a drafter and replaces each draft token, in order, with a wrong one with probability
// `reject_rate` (seeded), so a perfect drafter (a model drafting for itself) measures speed at a chosen acceptance.
class RejectionInjector final : public Drafter {
 public:
  RejectionInjector(std::unique_ptr<Drafter> inner, double reject_rate, int32_t vocab_size, uint64_t seed = 1);
  void propose(std::span<DraftRequest> requests) override;
  void release(uint64_t id) override { inner_->release(id); }

 private:
  std::unique_ptr<Drafter> inner_;
  double reject_rate_;
  int32_t vocab_size_;
  uint64_t state_;
};

}  // namespace rs::spec
