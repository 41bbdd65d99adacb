// Merge order and linear-ish behaviour of merge_word.
#include "tokenizer/bpe_merge.h"

#include <gtest/gtest.h>

namespace rs::tokenizer {
namespace {

std::vector<int32_t> merged(const std::vector<int32_t>& symbols, const MergeTable& merges) {
  std::vector<int32_t> out;
  merge_word(symbols, merges, out);
  return out;
}

TEST(BpeMerge, LowestRankFirstThenLeftmost) {
  // a=1 b=2; (a,b)->ab=10 rank 1; (b,a)->ba=11 rank 0; (a,a)->aa=12 rank 2.
  MergeTable merges;
  merges.insert(1, 2, {1, 10});
  merges.insert(2, 1, {0, 11});
  merges.insert(1, 1, {2, 12});
  EXPECT_EQ(merged({1, 2, 1}, merges), (std::vector<int32_t>{1, 11}));  // "aba" -> a + ba
  EXPECT_EQ(merged({1, 1, 1}, merges), (std::vector<int32_t>{12, 1}));  // leftmost tie
  EXPECT_EQ(merged({1, 1, 1, 1}, merges), (std::vector<int32_t>{12, 12}));
  EXPECT_EQ(merged({3}, merges), (std::vector<int32_t>{3}));
  EXPECT_TRUE(merged({}, merges).empty());
}

TEST(BpeMerge, LaterDuplicateOverwrites) {
  MergeTable merges;
  merges.insert(1, 2, {0, 10});
  merges.insert(1, 2, {5, 11});
  ASSERT_NE(merges.find(1, 2), nullptr);
  EXPECT_EQ(merges.find(1, 2)->new_id, 11);
  EXPECT_EQ(merges.size(), 1u);
  EXPECT_EQ(merges.find(2, 1), nullptr);
}

TEST(BpeMerge, LongRunOfOneSymbolMergesToPowersOfTwo) {
  // a(1)+a -> aa(2), aa+aa -> aaaa(3), ...: 100k symbols must not take quadratic time.
  MergeTable merges;
  for (int32_t level = 1; level < 8; ++level) merges.insert(level, level, {level, level + 1});
  const std::vector<int32_t> symbols(100000, 1);
  const std::vector<int32_t> out = merged(symbols, merges);
  // 100000 = 781 * 128 + 32: 781 tokens of 128 a's then one of 32.
  ASSERT_EQ(out.size(), 782u);
  EXPECT_EQ(out.front(), 8);
  EXPECT_EQ(out.back(), 6);
}

}  // namespace
}  // namespace rs::tokenizer
