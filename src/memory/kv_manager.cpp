#include "memory/kv_manager.h"

#include <algorithm>
#include <limits>

#include "base/error.h"

namespace rs::memory {

KvManager::KvManager(const KvPoolConfig& geometry, bool prefix_cache)
    : page_size_(geometry.page_size), prefix_cache_(prefix_cache) {
  RS_CHECK(!geometry.groups.empty(), "KV pool has no groups");
  for (const KvGroup& group : geometry.groups) {
    windows_.push_back(group.window);
    allocators_.emplace_back(group.num_pages);
  }
  cache_ = std::make_unique<RadixCache>(page_size_, windows_, allocators_);
}

int64_t KvManager::match(SeqPages& seq, std::span<const int32_t> tokens, int64_t max_tokens, int32_t* snapshot) {
  RS_CHECK(seq.pages.empty() && seq.locked == nullptr, "match on a sequence that already holds pages");
  if (snapshot) *snapshot = -1;
  if (!prefix_cache_) return 0;
  PrefixMatch match = cache_->match_prefix(tokens, max_tokens);
  if (snapshot) {
    // Back up to the deepest matched node with a snapshot: the recurrent state exists only there.
    const RadixNode* node = match.node;
    while (node && node->state_snapshot < 0) node = node->parent;
    const int64_t usable = node ? node->end() : 0;
    if (usable < match.num_tokens) match = cache_->match_prefix(tokens, usable);
    *snapshot = usable > 0 ? node->state_snapshot : -1;
  }
  seq.pages = std::move(match.pages);
  for (int g = 0; g < num_groups(); ++g)
    for (int32_t page : seq.pages[g])
      if (page >= 0) allocators_[g].ref(page);
  cache_->lock(match.node);
  seq.locked = match.node;
  return match.num_tokens;
}

int64_t KvManager::reserve(SeqPages& seq, int64_t begin, int64_t end) {
  seq.pages.resize(num_groups());
  for (int g = 0; g < num_groups(); ++g) {
    const int64_t first_page = window_first_position(windows_[g], begin) / page_size_;
    auto& pages = seq.pages[g];
    for (int64_t p = 0; p < std::min<int64_t>(first_page, pages.size()); ++p) {
      if (pages[p] < 0) continue;
      allocators_[g].unref(pages[p]);
      pages[p] = -1;
    }
  }
  int64_t reachable = end;
  for (int g = 0; g < num_groups(); ++g) {
    const int64_t have = static_cast<int64_t>(seq.pages[g].size());
    const int64_t short_by = (end + page_size_ - 1) / page_size_ - have - allocators_[g].num_free();
    if (short_by > 0) cache_->evict(g, short_by);
    reachable = std::min(reachable, (have + allocators_[g].num_free()) * page_size_);
  }
  if (reachable <= begin) return begin;
  const int64_t end_page = (reachable + page_size_ - 1) / page_size_;
  for (int g = 0; g < num_groups(); ++g)
    while (static_cast<int64_t>(seq.pages[g].size()) < end_page) seq.pages[g].push_back(allocators_[g].allocate());
  return reachable;
}

void KvManager::cache(SeqPages& seq, std::span<const int32_t> tokens, int64_t kv_len) {
  const int64_t num_pages = kv_len / page_size_;
  if (num_pages == 0 || !prefix_cache_) return;
  std::vector<std::vector<int32_t>> pages(num_groups());
  for (int g = 0; g < num_groups(); ++g) pages[g].assign(seq.pages[g].begin(), seq.pages[g].begin() + num_pages);
  RadixNode* node = cache_->insert(tokens.first(num_pages * page_size_), pages);
  cache_->lock(node);
  cache_->unlock(seq.locked);
  seq.locked = node;
}

void KvManager::release(SeqPages& seq) {
  for (int g = 0; g < static_cast<int>(seq.pages.size()); ++g)
    for (int32_t page : seq.pages[g])
      if (page >= 0) allocators_[g].unref(page);
  cache_->unlock(seq.locked);
  seq.pages.clear();
  seq.locked = nullptr;
}

int64_t KvManager::full_pages_available() const {
  int64_t available = std::numeric_limits<int64_t>::max();
  for (int g = 0; g < num_groups(); ++g)
    if (windows_[g] == 0) available = std::min(available, allocators_[g].num_free() + cache_->evictable_pages(g));
  return available;
}

int64_t KvManager::full_pages_total() const {
  int64_t total = std::numeric_limits<int64_t>::max();
  for (int g = 0; g < num_groups(); ++g)
    if (windows_[g] == 0) total = std::min(total, allocators_[g].num_pages());
  return total;
}

std::vector<KvGroupStats> KvManager::stats() const {
  std::vector<KvGroupStats> result;
  for (int g = 0; g < num_groups(); ++g)
    result.push_back(KvGroupStats{.window = windows_[g],
                                  .num_pages = allocators_[g].num_pages(),
                                  .used_pages = allocators_[g].num_used(),
                                  .cached_pages = cache_->num_pages(g),
                                  .evictable_pages = windows_[g] == 0 ? cache_->evictable_pages(g) : 0});
  return result;
}

}  // namespace rs::memory
