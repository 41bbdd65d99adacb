#include "spec/acceptance.h"

#include <gtest/gtest.h>

#include <vector>

namespace rs::spec {
namespace {

using Ids = std::vector<int32_t>;

TEST(AcceptedLength, CountsTheAgreeingPrefix) {
  EXPECT_EQ(accepted_length(Ids{1, 2, 3}, Ids{1, 2, 3, 4}), 3);
  EXPECT_EQ(accepted_length(Ids{1, 2, 3}, Ids{1, 9, 3, 4}), 1);
  EXPECT_EQ(accepted_length(Ids{1, 2, 3}, Ids{9, 2, 3, 4}), 0);
  EXPECT_EQ(accepted_length(Ids{}, Ids{5}), 0);
}

TEST(AcceptanceTracker, PausesAfterLowAcceptanceAndRetriesLater) {
  SpeculativeConfig config;
  config.min_accept_rate = 0.5;
  config.warmup_verifies = 4;
  config.retry_after = 10;
  AcceptanceTracker tracker;
  int32_t output = 0;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(tracker.should_draft(output));
    tracker.record(4, 0, ++output, config);
  }
  EXPECT_TRUE(tracker.should_draft(output));  // still warming up
  tracker.record(4, 0, ++output, config);
  EXPECT_FALSE(tracker.should_draft(output));
  EXPECT_FALSE(tracker.should_draft(output + 9));
  EXPECT_TRUE(tracker.should_draft(output + 10));
  EXPECT_EQ(tracker.totals().verifies, 4);
  EXPECT_EQ(tracker.totals().drafted, 16);
  EXPECT_EQ(tracker.totals().accepted, 0);
}

TEST(AcceptanceTracker, KeepsDraftingWhileAcceptanceHolds) {
  SpeculativeConfig config;
  config.min_accept_rate = 0.5;
  config.warmup_verifies = 2;
  AcceptanceTracker tracker;
  for (int32_t output = 1; output <= 100; ++output) {
    tracker.record(4, output % 4 == 0 ? 1 : 3, output, config);  // 3/4 mostly, sometimes 1/4
    ASSERT_TRUE(tracker.should_draft(output));
  }
  tracker.record(0, 0, 101, config);  // nothing drafted: nothing recorded
  EXPECT_EQ(tracker.totals().verifies, 100);
}

TEST(AcceptanceTracker, ZeroFloorNeverPauses) {
  SpeculativeConfig config;
  config.min_accept_rate = 0;
  AcceptanceTracker tracker;
  for (int32_t output = 1; output <= 50; ++output) tracker.record(4, 0, output, config);
  EXPECT_TRUE(tracker.should_draft(50));
}

TEST(SpecAlgorithm, ParsesNamesAndRefusesOthers) {
  EXPECT_EQ(parse_spec_algorithm("ngram"), SpecAlgorithm::kNgram);
  EXPECT_EQ(parse_spec_algorithm("draft"), SpecAlgorithm::kDraft);
  EXPECT_EQ(parse_spec_algorithm("none"), SpecAlgorithm::kNone);
  EXPECT_EQ(spec_algorithm_name(SpecAlgorithm::kNgram), "ngram");
  EXPECT_THROW(parse_spec_algorithm("eagle7"), std::exception);
}

}  // namespace
}  // namespace rs::spec
