#include "spec/drafter.h"

#include "base/error.h"

namespace rs::spec {

RejectionInjector::RejectionInjector(std::unique_ptr<Drafter> inner, double reject_rate, int32_t vocab_size,
                                     uint64_t seed)
    : inner_(std::move(inner)), reject_rate_(reject_rate), vocab_size_(vocab_size), state_(seed | 1) {
  RS_CHECK(inner_ != nullptr && reject_rate_ >= 0 && reject_rate_ <= 1 && vocab_size_ > 1,
           "rejection injection needs a drafter, a rate in [0, 1] and a vocabulary");
}

void RejectionInjector::propose(std::span<DraftRequest> requests) {
  inner_->propose(requests);
  for (DraftRequest& request : requests)
    for (int32_t& token : request.draft) {
      state_ ^= state_ << 13, state_ ^= state_ >> 7, state_ ^= state_ << 17;  // xorshift64
      if (static_cast<double>(state_ >> 11) * 0x1.0p-53 < reject_rate_) token = (token + 1) % vocab_size_;
    }
}

}  // namespace rs::spec
