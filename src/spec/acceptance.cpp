#include "spec/acceptance.h"

#include <algorithm>

namespace rs::spec {

int32_t accepted_length(std::span<const int32_t> draft, std::span<const int32_t> sampled) {
  const size_t limit = std::min(draft.size(), sampled.size());
  size_t m = 0;
  while (m < limit && draft[m] == sampled[m]) ++m;
  return static_cast<int32_t>(m);
}

void AcceptanceTracker::record(int32_t drafted, int32_t accepted, int32_t num_output, const SpeculativeConfig& config) {
  if (drafted <= 0) return;
  ++totals_.verifies;
  totals_.drafted += drafted;
  totals_.accepted += accepted;
  const double rate = static_cast<double>(accepted) / drafted;
  rate_ = recent_verifies_ == 0 ? rate : rate_ + kSmoothing * (rate - rate_);
  ++recent_verifies_;
  if (config.min_accept_rate > 0 && recent_verifies_ >= config.warmup_verifies && rate_ < config.min_accept_rate) {
    paused_until_ = num_output + std::max(config.retry_after, 1);
    recent_verifies_ = 0;
  }
}

}  // namespace rs::spec
