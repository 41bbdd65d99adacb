#include "engine/step_builder.h"

#include <gtest/gtest.h>

#include "base/error.h"

namespace rs::engine {
namespace {

const SamplingParams kGreedy{.temperature = 0.0f};

TEST(StepBuilder, LaysOutSequencesRowsAndPageTables) {
  // Two KV groups: full attention, and a window group whose first page went out of reach (-1).
  const std::vector<std::vector<int32_t>> a_pages = {{4, 7, 2}, {-1, 3, 5}};
  const std::vector<std::vector<int32_t>> b_pages = {{9}, {1}};
  StepBuilder step(2);
  const std::vector<int32_t> a_tokens = {11, 12, 13}, b_tokens = {21};
  EXPECT_EQ(step.add_sequence(a_tokens, 37, a_pages, 5), 0);  // a prefill chunk at positions 37..39
  EXPECT_EQ(step.add_sequence(b_tokens, 8, b_pages, 2), 3);   // a decode token at position 8
  step.add_logit_row(2, SamplingRow{.params = &kGreedy});
  step.add_logit_row(3, SamplingRow{.params = &kGreedy});
  const ForwardBatch batch = step.finish();
  EXPECT_EQ(batch.token_ids, (std::vector<int32_t>{11, 12, 13, 21}));
  EXPECT_EQ(batch.positions, (std::vector<int32_t>{37, 38, 39, 8}));
  EXPECT_EQ(batch.seq_token_start, (std::vector<int32_t>{0, 3, 4}));
  EXPECT_EQ(batch.seq_kv_len, (std::vector<int32_t>{40, 9}));
  EXPECT_EQ(batch.state_slots, (std::vector<int32_t>{5, 2}));
  EXPECT_EQ(batch.logit_rows, (std::vector<int32_t>{2, 3}));
  EXPECT_EQ(batch.max_pages, 3);
  ASSERT_EQ(batch.page_tables.size(), 2u);
  EXPECT_EQ(batch.page_tables[0], (std::vector<int32_t>{4, 7, 2, 9, -1, -1}));
  EXPECT_EQ(batch.page_tables[1], (std::vector<int32_t>{-1, 3, 5, 1, -1, -1}));
}

TEST(StepBuilder, PitchAtLeastTheMinimumAndCheckpointsCoverTheStep) {
  const std::vector<std::vector<int32_t>> pages = {{0}};
  StepBuilder step(1);
  const std::vector<int32_t> tokens = {1, 2};
  step.add_sequence(tokens, 0, pages);
  step.batch().state_checkpoints = {6};  // only the first token's: the rest are filled with -1
  const ForwardBatch batch = step.finish(4);
  EXPECT_EQ(batch.max_pages, 4);
  EXPECT_EQ(batch.page_tables[0], (std::vector<int32_t>{0, -1, -1, -1}));
  EXPECT_TRUE(batch.state_slots.empty());
  EXPECT_EQ(batch.state_checkpoints, (std::vector<int32_t>{6, -1}));
}

TEST(StepBuilder, RefusesInconsistentSteps) {
  const std::vector<std::vector<int32_t>> one_group = {{0}};
  const std::vector<int32_t> tokens = {1};
  StepBuilder step(2);
  EXPECT_THROW(step.add_sequence(tokens, 0, one_group), Error);  // a table per KV group
  StepBuilder slots(1);
  slots.add_sequence(tokens, 0, one_group, 3);
  EXPECT_THROW(slots.add_sequence(tokens, 0, one_group, -1), Error);             // state slots for all or none
  EXPECT_THROW(slots.add_logit_row(1, SamplingRow{.params = &kGreedy}), Error);  // past the step's tokens
  slots.add_logit_row(0, SamplingRow{.params = &kGreedy});
  EXPECT_THROW(slots.add_logit_row(0, SamplingRow{.params = &kGreedy}), Error);  // rows ascend
}

}  // namespace
}  // namespace rs::engine
