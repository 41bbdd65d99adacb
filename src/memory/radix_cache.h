// RadixCache: a radix tree of cached token prefixes whose values are KV pages, one page list per KV group.
// Pure CPU bookkeeping over PageAllocators (scheduler thread only). See docs/ARCHITECTURE.md on sliding windows.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "memory/cache_events.h"
#include "memory/page_allocator.h"

namespace rs::memory {

// One edge of the tree: a run of whole pages of tokens and the pages that hold their K/V.
struct RadixNode {
  std::vector<int32_t> tokens;              // this node's run; a multiple of page_size tokens (empty at the root)
  std::vector<std::vector<int32_t>> pages;  // [group][page of the run]; -1 = not resident (window groups only)
  int64_t start = 0;                        // tokens on the path before this node (its first position)
  RadixNode* parent = nullptr;              // non-owning; null at the root
  std::map<std::vector<int32_t>, std::unique_ptr<RadixNode>> children;  // keyed by the child's first page of tokens
  int32_t lock_ref = 0;                                                 // live requests using this node or a descendant
  uint64_t last_access = 0;  // LRU tick of the last match or insert through this node
  // Hybrid models: the recurrent-state slot holding the state after this node's last token (a snapshot), or -1. A
  // prefix of such a model is reusable only up to a node with a snapshot.
  int32_t state_snapshot = -1;
  std::vector<BlockHash> hashes;  // [page of the run] with an event sink (RadixCache::set_event_sink); else empty

  int64_t num_pages() const { return pages.empty() ? 0 : static_cast<int64_t>(pages[0].size()); }
  int64_t end() const { return start + static_cast<int64_t>(tokens.size()); }
};

// The reusable part of a cached prefix. The tree's references are not shared: the caller refs the pages it keeps.
struct PrefixMatch {
  int64_t num_tokens = 0;                   // page-aligned, reusable by every group
  RadixNode* node = nullptr;                // holds the last matched page (root when none); lock it while in use
  std::vector<std::vector<int32_t>> pages;  // [group][page < num_tokens / page_size]; -1 where a window group
                                            // no longer reads the page (before the window tail)
};

// First position a sliding window of `window` tokens still reads when the next token is at `next_position`
// (keys next-W+1 .. next, self included); 0 for full attention.
int64_t window_first_position(int32_t window, int64_t next_position);

class RadixCache {
 public:
  // group_windows[g]: 0 = full attention, W = sliding window of W tokens. allocators[g] must outlive the cache.
  RadixCache(int32_t page_size, std::vector<int32_t> group_windows, std::vector<PageAllocator>& allocators);
  RadixCache(const RadixCache&) = delete;
  RadixCache& operator=(const RadixCache&) = delete;

  // Longest cached prefix of tokens[0, max_tokens) that every group can reuse: full groups need every page, a window
  // group needs the pages of the last W-1 positions before the match point. Touches the path for LRU. A node matched
  // only in part is split at the match point, so that `node` (and what locking it pins) ends exactly there.
  PrefixMatch match_prefix(std::span<const int32_t> tokens, int64_t max_tokens);

  // Caches tokens (page-aligned) with pages[group][page]; -1 marks window pages no longer held. Adopted pages gain
  // a reference held by the tree; pages already cached are left to the caller, except that a resident window page
  // fills a non-resident slot. Returns the node holding the last page (root when tokens is empty).
  RadixNode* insert(std::span<const int32_t> tokens, const std::vector<std::vector<int32_t>>& pages);

  // lock: the node and its ancestors cannot be evicted until the matching unlock. Null and the root are no-ops.
  void lock(RadixNode* node);
  void unlock(RadixNode* node);

  // Frees at least num_pages pages of `group` if it can, returning how many it freed. Full groups evict unlocked
  // leaves in LRU order (all their groups' pages); window groups drop tree-only window pages, oldest node first and
  // front to back within a node, so that the tails at node ends (likely match points) go last.
  int64_t evict(int group, int64_t num_pages);
  // Drops every page that only the tree holds (the flush_cache endpoint). Locked paths stay.
  void evict_all();

  // Reports pages as they are cached, evicted and cleared (null: nobody listens). Set while the cache is empty;
  // `sink` must outlive the cache or be replaced.
  void set_event_sink(CacheEventSink* sink);

  // Recurrent-state snapshots (hybrid models). The cache owns each attached slot until it hands it to `release`:
  // when its node is evicted, or the snapshot is dropped.
  void set_snapshot_release(std::function<void(int32_t slot)> release) { release_snapshot_ = std::move(release); }
  // Attaches `slot` to the node that ends exactly after tokens[0, end) (splitting one that runs past it). False, with
  // nothing attached, when that prefix is not cached in full or already has a snapshot.
  bool attach_snapshot(std::span<const int32_t> tokens, int64_t end, int32_t slot);
  // Releases the least recently used snapshot (false when there is none), or the one in `slot`.
  bool drop_lru_snapshot();
  void drop_snapshot(int32_t slot);
  // Releases the snapshot in `slot` if it is still the one at the node ending `end` tokens into `tokens` (false
  // otherwise: it was evicted, and the slot may hold something else now).
  bool drop_snapshot_at(std::span<const int32_t> tokens, int64_t end, int32_t slot);
  int64_t num_snapshots() const { return num_snapshots_; }

  // Pages of `group` the tree holds references on, and how many of them eviction could free now.
  int64_t num_pages(int group) const { return held_pages_[group]; }
  int64_t evictable_pages(int group) const;
  int64_t num_nodes() const { return num_nodes_; }
  int32_t page_size() const { return page_size_; }
  const RadixNode& root() const { return root_; }

 private:
  RadixNode* split(RadixNode* node, int64_t num_pages);
  int64_t evict_leaves(int group, int64_t num_pages);
  int64_t drop_window_pages(int group, int64_t num_pages);
  void remove_leaf(RadixNode* node);
  std::vector<int32_t> first_page(const RadixNode& node) const;
  bool has_full_group() const;

  int32_t page_size_;
  std::vector<int32_t> windows_;            // [group]
  std::vector<PageAllocator>& allocators_;  // [group], owned by the scheduler
  RadixNode root_;
  std::vector<int64_t> held_pages_;    // [group] resident pages in the tree
  std::vector<int64_t> locked_pages_;  // [group] resident pages in locked nodes
  int64_t num_nodes_ = 0;
  uint64_t tick_ = 0;
  std::function<void(int32_t)> release_snapshot_;
  int64_t num_snapshots_ = 0;
  CacheEventSink* events_ = nullptr;
  std::vector<BlockHash>* removed_ = nullptr;  // while evict_all runs: where removed pages are gathered
  void detach_snapshot(RadixNode* node);
  void report_stored(RadixNode* node);
};

}  // namespace rs::memory
