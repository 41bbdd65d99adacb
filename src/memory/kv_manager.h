// KvManager: one pool's KV resources (a PageAllocator per KV group and the RadixCache) and the page table of every
// live sequence: prefix reuse, growth, sliding-window reclaim, caching and release. Used by the scheduler (the
// model's pool) and by the draft-model drafter (its own pool, no prefix cache); one thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "memory/kv_pool.h"
#include "memory/page_allocator.h"
#include "memory/radix_cache.h"

namespace rs::memory {

// The pages one sequence holds a reference on.
struct SeqPages {
  std::vector<std::vector<int32_t>> pages;  // [group][page index]; -1 = absent (reclaimed behind a window)
  RadixNode* locked = nullptr;              // deepest cached node this sequence keeps locked
};

struct KvGroupStats {
  int32_t window = 0;  // 0 = full attention
  int64_t num_pages = 0;
  int64_t used_pages = 0;    // referenced by sequences or the prefix cache
  int64_t cached_pages = 0;  // held by the prefix cache (some may also be used by sequences)
  // Full-attention groups: cached pages no sequence uses (eviction would free them), so used - evictable pages are
  // held by requests. Window groups: 0 (counting them walks the tree, too slow for every step).
  int64_t evictable_pages = 0;
};

class KvManager {
 public:
  // geometry: page size and groups with their num_pages (KvPool::config()). Without `prefix_cache` (serve's
  // --disable-radix-cache) nothing is ever matched or cached: every page is freed when its sequence releases it.
  explicit KvManager(const KvPoolConfig& geometry, bool prefix_cache = true);

  int32_t page_size() const { return page_size_; }
  int num_groups() const { return static_cast<int>(windows_.size()); }

  // Reuses the longest cached prefix of tokens[0, max_tokens): refs its pages into the empty `seq` and locks them.
  // Returns the number of tokens reused (page-aligned). With `snapshot` (hybrid models) only a prefix that ends at
  // a recurrent-state snapshot is reused, and *snapshot is its slot (-1 when nothing is reused).
  int64_t match(SeqPages& seq, std::span<const int32_t> tokens, int64_t max_tokens, int32_t* snapshot = nullptr);

  // Recurrent-state snapshots in the prefix cache (see RadixCache): attach needs tokens[0, end) cached.
  void set_snapshot_release(std::function<void(int32_t slot)> release) {
    cache_->set_snapshot_release(std::move(release));
  }
  bool attach_snapshot(std::span<const int32_t> tokens, int64_t end, int32_t slot) {
    return prefix_cache_ && cache_->attach_snapshot(tokens, end, slot);
  }
  bool drop_lru_snapshot() { return cache_->drop_lru_snapshot(); }
  void drop_snapshot(int32_t slot) { cache_->drop_snapshot(slot); }
  bool drop_snapshot_at(std::span<const int32_t> tokens, int64_t end, int32_t slot) {
    return cache_->drop_snapshot_at(tokens, end, slot);
  }
  int64_t num_snapshots() const { return cache_->num_snapshots(); }
  bool prefix_cache() const { return prefix_cache_; }

  // Makes positions [begin, end) writable in every group for a sequence whose K/V ends at `begin`: first drops the
  // window pages no token from `begin` on can read, then allocates pages, evicting cached pages when short.
  // Returns the end actually reserved: `end`, or less (down to `begin`) when the pool cannot supply more.
  int64_t reserve(SeqPages& seq, int64_t begin, int64_t end);

  // Caches the whole pages of tokens[0, kv_len) and moves the sequence's lock to the cached path.
  void cache(SeqPages& seq, std::span<const int32_t> tokens, int64_t kv_len);

  // Drops every page reference and the lock of `seq`.
  void release(SeqPages& seq);

  // Pages of full-attention groups needed to hold `tokens` positions, and how many could be supplied now
  // (free + evictable), minimised over the full-attention groups. Used for admission; window groups are bounded.
  int64_t full_pages_for(int64_t tokens) const { return (tokens + page_size_ - 1) / page_size_; }
  int64_t full_pages_available() const;
  int64_t full_pages_total() const;

  void flush_cache() { cache_->evict_all(); }
  // KV cache events (see RadixCache::set_event_sink); without the prefix cache nothing is ever cached or reported.
  void set_event_sink(CacheEventSink* sink) { cache_->set_event_sink(sink); }
  std::vector<KvGroupStats> stats() const;

 private:
  int32_t page_size_;
  bool prefix_cache_;
  std::vector<int32_t> windows_;           // [group]
  std::vector<PageAllocator> allocators_;  // [group]
  std::unique_ptr<RadixCache> cache_;      // refers to allocators_
};

}  // namespace rs::memory
