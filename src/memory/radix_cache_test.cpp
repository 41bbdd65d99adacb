#include "memory/radix_cache.h"

#include <gtest/gtest.h>

#include <numeric>

namespace rs::memory {
namespace {

constexpr int32_t kPageSize = 4;

// A cache over one full-attention group and, optionally, one window group, with helpers that play a request.
class RadixCacheTest : public ::testing::Test {
 protected:
  void make(std::vector<int32_t> windows, int64_t pages_per_group = 64) {
    allocators_.clear();
    for (size_t g = 0; g < windows.size(); ++g) allocators_.emplace_back(pages_per_group);
    windows_ = windows;
    cache_ = std::make_unique<RadixCache>(kPageSize, windows, allocators_);
  }

  // Allocates pages for `tokens` as a finished request would hold them (window groups: only the tail pages).
  std::vector<std::vector<int32_t>> allocate(int64_t num_tokens) {
    std::vector<std::vector<int32_t>> pages(windows_.size());
    for (size_t g = 0; g < windows_.size(); ++g) {
      const int64_t first = window_first_position(windows_[g], num_tokens) / kPageSize;
      for (int64_t p = 0; p < num_tokens / kPageSize; ++p)
        pages[g].push_back(p < first ? -1 : allocators_[g].allocate());
    }
    return pages;
  }

  // Inserts then drops the caller's references, as a finishing request does.
  RadixNode* insert_and_release(const std::vector<int32_t>& tokens) {
    auto pages = allocate(static_cast<int64_t>(tokens.size()));
    RadixNode* node = cache_->insert(tokens, pages);
    for (size_t g = 0; g < pages.size(); ++g)
      for (int32_t id : pages[g])
        if (id >= 0) allocators_[g].unref(id);
    return node;
  }

  static std::vector<int32_t> iota_tokens(int count, int first = 100) {
    std::vector<int32_t> tokens(count);
    std::iota(tokens.begin(), tokens.end(), first);
    return tokens;
  }

  std::vector<int32_t> windows_;
  std::vector<PageAllocator> allocators_;
  std::unique_ptr<RadixCache> cache_;
};

TEST_F(RadixCacheTest, MatchesWholePagesUpToTheLimit) {
  make({0});
  auto tokens = iota_tokens(16);
  insert_and_release(tokens);
  EXPECT_EQ(cache_->num_pages(0), 4);
  EXPECT_EQ(allocators_[0].num_used(), 4);

  EXPECT_EQ(cache_->match_prefix(tokens, 16).num_tokens, 16);
  EXPECT_EQ(cache_->match_prefix(tokens, 15).num_tokens, 12);  // the last prompt token is always recomputed
  auto longer = iota_tokens(20);
  EXPECT_EQ(cache_->match_prefix(longer, 19).num_tokens, 16);
  auto diverging = tokens;
  diverging[9] = 7;
  PrefixMatch match = cache_->match_prefix(diverging, 16);
  EXPECT_EQ(match.num_tokens, 8);
  ASSERT_EQ(match.pages[0].size(), 2u);
  EXPECT_EQ(cache_->match_prefix(iota_tokens(8, 5), 8).num_tokens, 0);
}

TEST_F(RadixCacheTest, SplitsAtTheDivergingPageAndKeepsLockedNodes) {
  make({0});
  auto first = iota_tokens(16);
  RadixNode* leaf = insert_and_release(first);
  cache_->lock(leaf);
  auto second = first;
  second[12] = 1;  // diverges in the last page
  insert_and_release(second);
  EXPECT_EQ(cache_->num_nodes(), 3);
  EXPECT_EQ(cache_->num_pages(0), 5);
  EXPECT_EQ(leaf->start, 12);
  EXPECT_EQ(leaf->parent->lock_ref, 1);  // the new upper node inherits the lock
  EXPECT_EQ(cache_->match_prefix(first, 16).num_tokens, 16);
  EXPECT_EQ(cache_->match_prefix(second, 16).num_tokens, 16);

  // Only the unlocked branch can go.
  EXPECT_EQ(cache_->evictable_pages(0), 1);
  EXPECT_EQ(cache_->evict(0, 100), 1);
  EXPECT_EQ(cache_->match_prefix(second, 16).num_tokens, 12);
  cache_->unlock(leaf);
  EXPECT_EQ(cache_->evict(0, 100), 4);
  EXPECT_EQ(allocators_[0].num_used(), 0);
  EXPECT_EQ(cache_->num_nodes(), 0);
}

// A prompt that matches only the front of a cached node must lock only that front: the node's unmatched rest
// stays evictable (a whole-node lock once pinned it and wedged admission when the pool was small).
TEST_F(RadixCacheTest, PartialMatchSplitsTheNodeSoOnlyTheMatchIsLocked) {
  make({0}, 8);
  auto cached = iota_tokens(24);  // one node of 6 pages
  insert_and_release(cached);
  ASSERT_EQ(cache_->num_nodes(), 1);
  auto prompt = iota_tokens(4);  // shares the first page only
  prompt.insert(prompt.end(), {1, 2, 3, 4, 5, 6, 7, 8});
  PrefixMatch match = cache_->match_prefix(prompt, 12);
  EXPECT_EQ(match.num_tokens, 4);
  ASSERT_NE(match.node, nullptr);
  EXPECT_EQ(match.node->end(), 4);  // the node ends at the match point
  EXPECT_EQ(cache_->num_nodes(), 2);
  cache_->lock(match.node);
  EXPECT_EQ(cache_->evictable_pages(0), 5);
  EXPECT_EQ(cache_->evict(0, 100), 5);
  EXPECT_EQ(cache_->match_prefix(cached, 24).num_tokens, 4);
  cache_->unlock(match.node);
  EXPECT_EQ(cache_->evict(0, 100), 1);
  EXPECT_EQ(allocators_[0].num_used(), 0);
  EXPECT_EQ(cache_->num_nodes(), 0);
}

TEST_F(RadixCacheTest, EvictsLeastRecentlyUsedLeavesFirst) {
  make({0});
  auto a = iota_tokens(8, 0), b = iota_tokens(8, 50), c = iota_tokens(8, 90);
  insert_and_release(a);
  insert_and_release(b);
  insert_and_release(c);
  cache_->match_prefix(a, 8);         // a is now the most recent
  EXPECT_EQ(cache_->evict(0, 3), 4);  // two whole leaves: b then c
  EXPECT_EQ(cache_->match_prefix(a, 8).num_tokens, 8);
  EXPECT_EQ(cache_->match_prefix(b, 8).num_tokens, 0);
  EXPECT_EQ(cache_->match_prefix(c, 8).num_tokens, 0);
}

TEST_F(RadixCacheTest, PagesStillUsedByRequestsSurviveEviction) {
  make({0});
  auto tokens = iota_tokens(8);
  auto pages = allocate(8);
  cache_->insert(tokens, pages);  // the request keeps its own references
  cache_->evict(0, 100);
  EXPECT_EQ(cache_->num_pages(0), 0);
  EXPECT_EQ(allocators_[0].num_used(), 2);
  for (int32_t id : pages[0]) allocators_[0].unref(id);
  EXPECT_EQ(allocators_[0].num_used(), 0);
}

TEST_F(RadixCacheTest, WindowGroupReusesOnlyWhereTheTailIsResident) {
  make({0, 8});  // window 8 = two pages of tail before the match point (positions m-7 .. m-1)
  auto tokens = iota_tokens(32);
  insert_and_release(tokens);  // window pages resident only for positions 25..31 -> pages 6, 7
  EXPECT_EQ(cache_->num_pages(1), 2);
  PrefixMatch full = cache_->match_prefix(tokens, 32);
  EXPECT_EQ(full.num_tokens, 32);
  EXPECT_EQ(full.pages[1][5], -1);
  EXPECT_GE(full.pages[1][6], 0);
  // A prompt that diverges inside the sequence cannot reuse the window layers there: nothing is resident.
  auto diverging = tokens;
  diverging[20] = 1;
  EXPECT_EQ(cache_->match_prefix(diverging, 32).num_tokens, 0);
  // ... unless a request that kept those pages inserts them.
  auto prefix = std::vector<int32_t>(tokens.begin(), tokens.begin() + 20);
  auto pages = allocate(20);  // window pages 3, 4 (positions 13..19)
  std::vector<std::vector<int32_t>> padded = pages;
  cache_->insert(prefix, padded);
  EXPECT_EQ(cache_->match_prefix(diverging, 32).num_tokens, 20);
  for (size_t g = 0; g < pages.size(); ++g)
    for (int32_t id : pages[g])
      if (id >= 0) allocators_[g].unref(id);
}

TEST_F(RadixCacheTest, WindowEvictionDropsOldPagesFrontFirstAndSparesPagesInUse) {
  make({0, 8});
  auto tokens = iota_tokens(16);
  auto pages = allocate(16);
  // Pretend the request kept every window page (as after a prefill) and caches them all.
  for (int64_t p = 0; p < 4; ++p)
    if (pages[1][p] < 0) pages[1][p] = allocators_[1].allocate();
  cache_->insert(tokens, pages);
  for (int32_t id : pages[0]) allocators_[0].unref(id);
  for (int p = 0; p < 2; ++p) allocators_[1].unref(pages[1][p]);  // the request still reads pages 2, 3
  EXPECT_EQ(cache_->evictable_pages(1), 2);
  EXPECT_EQ(cache_->evict(1, 1), 1);
  EXPECT_EQ(cache_->match_prefix(tokens, 16).num_tokens, 16);
  EXPECT_EQ(cache_->match_prefix(tokens, 8).num_tokens, 0);  // page 0 gone: a match at 4 or 8 reads it
  EXPECT_EQ(cache_->evict(1, 10), 1);                        // pages 2, 3 are in use
  for (int p = 2; p < 4; ++p) allocators_[1].unref(pages[1][p]);
  EXPECT_EQ(cache_->evict(1, 10), 2);
  EXPECT_EQ(cache_->match_prefix(tokens, 16).num_tokens, 0);
  EXPECT_EQ(allocators_[1].num_used(), 0);
}

TEST_F(RadixCacheTest, EvictAllKeepsLockedPaths) {
  make({0, 8});
  RadixNode* kept = insert_and_release(iota_tokens(16, 0));
  insert_and_release(iota_tokens(16, 40));
  cache_->lock(kept);
  cache_->evict_all();
  EXPECT_EQ(cache_->num_pages(0), 4);
  cache_->unlock(kept);
  cache_->evict_all();
  EXPECT_EQ(cache_->num_pages(0), 0);
  EXPECT_EQ(cache_->num_pages(1), 0);
  EXPECT_EQ(allocators_[0].num_used() + allocators_[1].num_used(), 0);
}

TEST_F(RadixCacheTest, WindowOnlyModelDropsEmptyNodes) {
  make({8});
  insert_and_release(iota_tokens(16));
  EXPECT_EQ(cache_->num_nodes(), 1);
  EXPECT_EQ(cache_->evict(0, 10), 2);
  EXPECT_EQ(cache_->num_nodes(), 0);
}

}  // namespace
}  // namespace rs::memory
