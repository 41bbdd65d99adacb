#include "spec/drafter.h"

#include <gtest/gtest.h>

namespace rs::spec {
namespace {

// Always proposes 0, 1, 2, ...
class CountingDrafter final : public Drafter {
 public:
  void propose(std::span<DraftRequest> requests) override {
    for (auto& request : requests) {
      request.draft.clear();
      for (int32_t i = 0; i < request.max_tokens; ++i) request.draft.push_back(i);
    }
  }
  void release(uint64_t id) override { released = id; }
  uint64_t released = 0;
};

int changed_tokens(double rate, int rounds) {
  RejectionInjector injector(std::make_unique<CountingDrafter>(), rate, 8);
  int changed = 0;
  for (int round = 0; round < rounds; ++round) {
    std::vector<DraftRequest> requests(2, DraftRequest{.max_tokens = 5});
    injector.propose(requests);
    for (const auto& request : requests)
      for (int32_t i = 0; i < 5; ++i) {
        EXPECT_GE(request.draft[i], 0);
        EXPECT_LT(request.draft[i], 8);
        changed += request.draft[i] != i;
      }
  }
  return changed;
}

TEST(RejectionInjector, ChangesTokensAtTheAskedRate) {
  EXPECT_EQ(changed_tokens(0.0, 100), 0);
  EXPECT_EQ(changed_tokens(1.0, 100), 1000);
  const int changed = changed_tokens(0.3, 1000);  // of 10,000 tokens: 3,000 expected, sd ~46
  EXPECT_GT(changed, 2800);
  EXPECT_LT(changed, 3200);
}

TEST(RejectionInjector, PassesReleaseThroughAndRefusesBadRates) {
  auto inner = std::make_unique<CountingDrafter>();
  CountingDrafter* counting = inner.get();
  RejectionInjector injector(std::move(inner), 0.5, 8);
  injector.release(42);
  EXPECT_EQ(counting->released, 42u);
  EXPECT_THROW(RejectionInjector(std::make_unique<CountingDrafter>(), 1.5, 8), std::exception);
  EXPECT_THROW(RejectionInjector(nullptr, 0.5, 8), std::exception);
}

}  // namespace
}  // namespace rs::spec
