// The radix cache's reports to a CacheEventSink: every page stored once with the hash of its whole prefix, removals
// naming exactly what was stored, splits invisible, and a flush that empties the cache reported as cleared.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <optional>

#include "memory/cache_events.h"
#include "memory/radix_cache.h"

namespace rs::memory {
namespace {

constexpr int32_t kPageSize = 4;

// FNV-1a over the parent hash and the tokens, spread over 32 bytes: enough to tell prefixes apart in a test.
BlockHash chain(const BlockHash* parent, std::span<const int32_t> tokens) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](uint64_t byte) { h = (h ^ byte) * 1099511628211ull; };
  if (parent)
    for (uint8_t b : *parent) mix(b);
  else
    mix(0xff);
  for (int32_t t : tokens)
    for (int i = 0; i < 4; ++i) mix((static_cast<uint32_t>(t) >> (8 * i)) & 0xff);
  BlockHash out{};
  for (int i = 0; i < 32; ++i) out[i] = static_cast<uint8_t>(h >> (8 * (i % 8))) ^ static_cast<uint8_t>(i);
  return out;
}

// The hashes of every whole page of `tokens`, computed from the start (what a router indexing the prompt computes).
std::vector<BlockHash> prefix_hashes(const std::vector<int32_t>& tokens) {
  std::vector<BlockHash> hashes;
  for (size_t p = 0; p + kPageSize <= tokens.size(); p += kPageSize)
    hashes.push_back(chain(hashes.empty() ? nullptr : &hashes.back(), {tokens.data() + p, kPageSize}));
  return hashes;
}

struct Recorder : CacheEventSink {
  struct Stored {
    std::optional<BlockHash> parent;
    std::vector<BlockHash> hashes;
    std::vector<int32_t> tokens;
  };
  BlockHash hash_block(const BlockHash* parent, std::span<const int32_t> tokens) override {
    return chain(parent, tokens);
  }
  void stored(const BlockHash* parent, std::span<const BlockHash> hashes, std::span<const int32_t> tokens) override {
    stores.push_back({parent ? std::optional(*parent) : std::nullopt,
                      {hashes.begin(), hashes.end()},
                      {tokens.begin(), tokens.end()}});
    for (const BlockHash& h : hashes) ++live[h];
  }
  void removed(std::span<const BlockHash> hashes) override {
    removals.emplace_back(hashes.begin(), hashes.end());
    for (const BlockHash& h : hashes) {
      EXPECT_GT(live[h], 0) << "a page removed that was never stored";
      if (--live[h] == 0) live.erase(h);
    }
  }
  void cleared() override {
    ++clears;
    live.clear();
  }
  void end_step() override {}

  std::vector<Stored> stores;
  std::vector<std::vector<BlockHash>> removals;
  std::map<BlockHash, int> live;  // stored and not yet removed
  int clears = 0;
};

class CacheEventsTest : public ::testing::Test {
 protected:
  CacheEventsTest() : allocators_(1, PageAllocator(64)), cache_(kPageSize, {0}, allocators_) {
    cache_.set_event_sink(&events_);
  }

  RadixNode* cache(const std::vector<int32_t>& tokens) {
    std::vector<std::vector<int32_t>> pages(1);
    for (size_t p = 0; p < tokens.size() / kPageSize; ++p) pages[0].push_back(allocators_[0].allocate());
    RadixNode* node = cache_.insert(tokens, pages);
    for (int32_t id : pages[0]) allocators_[0].unref(id);
    return node;
  }

  static std::vector<int32_t> tokens(int count, int first) {
    std::vector<int32_t> out(count);
    std::iota(out.begin(), out.end(), first);
    return out;
  }

  Recorder events_;
  std::vector<PageAllocator> allocators_;
  RadixCache cache_;
};

TEST_F(CacheEventsTest, StoresEachNewPageOnceWithItsPrefixChain) {
  const auto a = tokens(12, 100);
  cache(a);
  ASSERT_EQ(events_.stores.size(), 1u);
  EXPECT_FALSE(events_.stores[0].parent.has_value());
  EXPECT_EQ(events_.stores[0].hashes, prefix_hashes(a));
  EXPECT_EQ(events_.stores[0].tokens, a);

  // The same prompt again stores nothing; a longer one stores only its new pages, chained to the cached ones.
  cache(a);
  auto ab = a;
  for (int t : tokens(8, 500)) ab.push_back(t);
  ab.push_back(7);  // a partial page is never cached
  cache({ab.begin(), ab.begin() + 20});
  ASSERT_EQ(events_.stores.size(), 2u);
  const auto full = prefix_hashes({ab.begin(), ab.begin() + 20});
  EXPECT_EQ(events_.stores[1].parent, full[2]);
  EXPECT_EQ(events_.stores[1].hashes, std::vector<BlockHash>(full.begin() + 3, full.end()));
  EXPECT_EQ(events_.stores[1].tokens, std::vector<int32_t>(ab.begin() + 12, ab.begin() + 20));
}

TEST_F(CacheEventsTest, ABranchInsideANodeChainsToTheSharedPagesAndEvictionsNameWhatWasStored) {
  const auto a = tokens(16, 100);
  auto b = a;
  b[9] = 9999;  // differs in the third page: the cached node is split after two pages
  cache(a);
  cache(b);
  ASSERT_EQ(events_.stores.size(), 2u);
  const auto hb = prefix_hashes(b);
  EXPECT_EQ(events_.stores[1].parent, hb[1]);
  EXPECT_EQ(events_.stores[1].hashes, std::vector<BlockHash>(hb.begin() + 2, hb.end()));
  EXPECT_EQ(events_.live.size(), 6u);  // 2 shared + 2 + 2

  // Evicting page by page (leaves first, LRU) removes exactly the stored pages, each once.
  while (cache_.evict(0, 1) > 0) {
  }
  EXPECT_TRUE(events_.live.empty());
  size_t removed = 0;
  for (const auto& r : events_.removals) removed += r.size();
  EXPECT_EQ(removed, 6u);
  EXPECT_EQ(events_.clears, 0);
}

TEST_F(CacheEventsTest, AFlushThatEmptiesTheCacheIsClearedAndOneThatCannotListsItsRemovals) {
  const auto a = tokens(8, 100), b = tokens(8, 300);
  cache(a);
  RadixNode* held = cache(b);
  cache_.lock(held);  // a running request uses b
  cache_.evict_all();
  EXPECT_EQ(events_.clears, 0);
  ASSERT_EQ(events_.removals.size(), 1u);
  EXPECT_EQ(events_.removals[0], prefix_hashes(a));
  cache_.unlock(held);
  cache_.evict_all();
  EXPECT_EQ(events_.clears, 1);
  EXPECT_EQ(events_.removals.size(), 1u);  // cleared says it all
}

TEST(CacheEventsSetup, TheSinkIsSetOnlyWhileTheCacheIsEmpty) {
  std::vector<PageAllocator> allocators(1, PageAllocator(8));
  RadixCache cache(kPageSize, {0}, allocators);
  const int32_t page = allocators[0].allocate();
  cache.insert(std::vector<int32_t>{1, 2, 3, 4}, {{page}});
  EXPECT_TRUE(cache.match_prefix(std::vector<int32_t>{1, 2, 3, 4}, 4).node->hashes.empty());  // nobody listens
  Recorder recorder;
  EXPECT_THROW(cache.set_event_sink(&recorder), std::exception);
}

}  // namespace
}  // namespace rs::memory
