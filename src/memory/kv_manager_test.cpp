#include "memory/kv_manager.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

namespace rs::memory {
namespace {

KvPoolConfig geometry(int64_t full_pages, int64_t window_pages, int32_t window) {
  KvPoolConfig config;
  config.page_size = 4;
  config.groups.resize(2);
  config.groups[0].num_pages = full_pages;
  config.groups[1].window = window;
  config.groups[1].num_pages = window_pages;
  return config;
}

// One full-attention group of `pages` pages of 4 tokens.
KvPoolConfig full_attention(int64_t pages) {
  KvPoolConfig config;
  config.page_size = 4;
  config.groups.resize(1);
  config.groups[0].num_pages = pages;
  return config;
}

std::vector<int32_t> tokens(int count) {
  std::vector<int32_t> result(count);
  std::iota(result.begin(), result.end(), 10);
  return result;
}

TEST(KvManager, ReserveGrowsPagesAndReclaimsBehindTheWindow) {
  KvManager kv(geometry(16, 16, 8));
  SeqPages seq;
  EXPECT_EQ(kv.reserve(seq, 0, 20), 20);
  EXPECT_EQ(seq.pages[0].size(), 5u);
  EXPECT_EQ(kv.stats()[1].used_pages, 5);
  // The next token at 20 reads 13..20: pages 0..2 of the window group go back to the pool.
  EXPECT_EQ(kv.reserve(seq, 20, 21), 21);
  EXPECT_EQ(seq.pages[1][2], -1);
  EXPECT_GE(seq.pages[1][3], 0);
  EXPECT_EQ(kv.stats()[1].used_pages, 3);
  EXPECT_EQ(kv.stats()[0].used_pages, 6);
  kv.release(seq);
  EXPECT_EQ(kv.stats()[0].used_pages, 0);
  EXPECT_EQ(kv.stats()[1].used_pages, 0);
}

TEST(KvManager, ReserveStopsAtWhatThePoolHolds) {
  KvManager kv(geometry(4, 16, 8));
  SeqPages a, b;
  EXPECT_EQ(kv.reserve(a, 0, 12), 12);
  EXPECT_EQ(kv.reserve(b, 0, 12), 4);  // one full-attention page left
  EXPECT_EQ(kv.reserve(b, 4, 8), 4);   // none left
  kv.release(a);
  kv.release(b);
}

TEST(KvManager, CachedPrefixIsMatchedAndEvictedUnderPressure) {
  KvManager kv(geometry(8, 16, 8));
  auto prompt = tokens(16);
  SeqPages first;
  kv.reserve(first, 0, 16);
  kv.cache(first, prompt, 16);
  kv.release(first);
  EXPECT_EQ(kv.stats()[0].cached_pages, 4);
  EXPECT_EQ(kv.full_pages_available(), 8);

  SeqPages second;
  EXPECT_EQ(kv.match(second, prompt, 15), 12);
  EXPECT_EQ(kv.full_pages_available(), 5);  // the 3 matched pages are locked; the unmatched 4th stays evictable
  kv.release(second);

  SeqPages big;
  EXPECT_EQ(kv.reserve(big, 0, 32), 32);  // evicts the cached prefix to make room
  EXPECT_EQ(kv.stats()[0].cached_pages, 0);
  kv.release(big);
}

TEST(KvManager, WithoutPrefixCacheNothingIsCachedOrMatched) {
  KvManager kv(geometry(8, 16, 8), /*prefix_cache=*/false);
  auto prompt = tokens(16);
  SeqPages first;
  kv.reserve(first, 0, 16);
  kv.cache(first, prompt, 16);
  kv.release(first);
  EXPECT_EQ(kv.stats()[0].cached_pages, 0);
  EXPECT_EQ(kv.stats()[0].used_pages, 0);

  SeqPages second;
  EXPECT_EQ(kv.match(second, prompt, 15), 0);
  EXPECT_EQ(kv.reserve(second, 0, 16), 16);
  kv.release(second);
  EXPECT_EQ(kv.stats()[0].used_pages, 0);
}

// Recurrent-state snapshots (hybrid models): a prefix is reused only up to the deepest node with a snapshot, and
// each snapshot's slot comes back when its node is evicted or the snapshot is dropped.
TEST(KvManager, SnapshotsBoundTheReusedPrefixAndAreReleasedWithTheirNodes) {
  KvManager kv(full_attention(8));
  std::vector<int32_t> released;
  kv.set_snapshot_release([&](int32_t slot) { released.push_back(slot); });
  const std::vector<int32_t> prompt = tokens(24);
  SeqPages first;
  ASSERT_EQ(kv.reserve(first, 0, 24), 24);
  kv.cache(first, prompt, 24);
  EXPECT_FALSE(kv.attach_snapshot(prompt, 10, 7));  // not a page boundary
  EXPECT_TRUE(kv.attach_snapshot(prompt, 8, 3));
  EXPECT_TRUE(kv.attach_snapshot(prompt, 16, 5));
  EXPECT_FALSE(kv.attach_snapshot(prompt, 16, 6));  // one is there already
  EXPECT_EQ(kv.num_snapshots(), 2);
  kv.release(first);

  int32_t snapshot = -1;
  SeqPages second;  // shares all 24 tokens: resumes after 16, the deepest snapshot
  EXPECT_EQ(kv.match(second, prompt, 23, &snapshot), 16);
  EXPECT_EQ(snapshot, 5);
  EXPECT_EQ(second.pages[0].size(), 4u);
  kv.release(second);
  SeqPages third;  // shares 13: resumes after 8
  EXPECT_EQ(kv.match(third, std::vector<int32_t>(prompt.begin(), prompt.begin() + 13), 13, &snapshot), 8);
  EXPECT_EQ(snapshot, 3);
  kv.release(third);
  SeqPages plain;  // without asking for a snapshot the whole cached prefix is reused
  EXPECT_EQ(kv.match(plain, prompt, 23), 20);
  kv.release(plain);

  EXPECT_TRUE(kv.drop_lru_snapshot());
  EXPECT_EQ(released.size(), 1u);
  kv.flush_cache();  // evicting the nodes releases the other snapshot
  EXPECT_EQ(kv.num_snapshots(), 0);
  std::sort(released.begin(), released.end());
  EXPECT_EQ(released, (std::vector<int32_t>{3, 5}));
  EXPECT_FALSE(kv.drop_lru_snapshot());
}

// A sequence drops its previous output snapshot by position: only if that node still holds the slot it attached.
TEST(KvManager, DropSnapshotAtChecksTheNodeStillHoldsTheSlot) {
  KvManager kv(full_attention(8));
  std::vector<int32_t> released;
  kv.set_snapshot_release([&](int32_t slot) { released.push_back(slot); });
  const std::vector<int32_t> prompt = tokens(16);
  SeqPages seq;
  ASSERT_EQ(kv.reserve(seq, 0, 16), 16);
  kv.cache(seq, prompt, 16);
  ASSERT_TRUE(kv.attach_snapshot(prompt, 8, 2));
  EXPECT_FALSE(kv.drop_snapshot_at(prompt, 8, 4));   // another slot
  EXPECT_FALSE(kv.drop_snapshot_at(prompt, 12, 2));  // another node
  EXPECT_TRUE(released.empty());
  EXPECT_TRUE(kv.drop_snapshot_at(prompt, 8, 2));
  EXPECT_EQ(released, (std::vector<int32_t>{2}));
  EXPECT_EQ(kv.num_snapshots(), 0);
  EXPECT_FALSE(kv.drop_snapshot_at(prompt, 8, 2));  // gone already
  kv.release(seq);
}

}  // namespace
}  // namespace rs::memory
