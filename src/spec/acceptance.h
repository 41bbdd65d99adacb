// Verification arithmetic shared by every drafter: how much of a draft the target keeps, and when drafting for a
// request has stopped paying.
#pragma once

#include <cstdint>
#include <span>

#include "spec/speculative_config.h"

namespace rs::spec {

// The target sampled sampled[j] at the position of draft[j] (sampled has one more entry: the token after the whole
// draft). Returns m, the draft tokens kept: draft[0, m) equal sampled[0, m); the step outputs sampled[0, m].
int32_t accepted_length(std::span<const int32_t> draft, std::span<const int32_t> sampled);

// A request's speculation totals (reported in its usage and in /metrics).
struct SpecTotals {
  int64_t verifies = 0;  // target passes that verified a draft of this request
  int64_t drafted = 0;   // draft tokens proposed
  int64_t accepted = 0;  // of which the target kept
};

// Per request: whether to draft now. Drafting pauses while the moving acceptance rate is below the configured
// minimum (a verify pass of rejected tokens costs more than a plain decode step) and resumes later.
class AcceptanceTracker {
 public:
  bool should_draft(int32_t num_output) const { return num_output >= paused_until_; }
  void record(int32_t drafted, int32_t accepted, int32_t num_output, const SpeculativeConfig& config);
  const SpecTotals& totals() const { return totals_; }

 private:
  static constexpr double kSmoothing = 1.0 / 8;  // weight of the newest verify in the moving rate
  SpecTotals totals_;
  double rate_ = 0;
  int32_t recent_verifies_ = 0;  // since drafting (re)started
  int32_t paused_until_ = 0;     // no drafting before this many output tokens
};

}  // namespace rs::spec
