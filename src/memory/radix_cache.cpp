#include "memory/radix_cache.h"

#include <algorithm>
#include <queue>

#include "base/error.h"

namespace rs::memory {

int64_t window_first_position(int32_t window, int64_t next_position) {
  return window > 0 ? std::max<int64_t>(0, next_position - (window - 1)) : 0;
}

RadixCache::RadixCache(int32_t page_size, std::vector<int32_t> group_windows, std::vector<PageAllocator>& allocators)
    : page_size_(page_size),
      windows_(std::move(group_windows)),
      allocators_(allocators),
      held_pages_(windows_.size(), 0),
      locked_pages_(windows_.size(), 0) {
  RS_CHECK(page_size_ > 0, "page size must be positive");
  RS_CHECK(!windows_.empty() && windows_.size() == allocators_.size(), "{} KV groups but {} allocators",
           windows_.size(), allocators_.size());
  root_.pages.resize(windows_.size());
}

std::vector<int32_t> RadixCache::first_page(const RadixNode& node) const {
  return {node.tokens.begin(), node.tokens.begin() + page_size_};
}

bool RadixCache::has_full_group() const { return std::find(windows_.begin(), windows_.end(), 0) != windows_.end(); }

// Appends every node below `node` in preorder (parents before their children).
static void collect(const RadixNode& node, std::vector<RadixNode*>& out) {
  for (const auto& [key, child] : node.children) {
    out.push_back(child.get());
    collect(*child, out);
  }
}

PrefixMatch RadixCache::match_prefix(std::span<const int32_t> tokens, int64_t max_tokens) {
  const int num_groups = static_cast<int>(windows_.size());
  const int64_t max_pages = std::clamp<int64_t>(max_tokens, 0, tokens.size()) / page_size_;
  PrefixMatch match;
  match.pages.resize(num_groups);
  std::vector<RadixNode*> page_node;  // [page] the node holding it
  ++tick_;
  RadixNode* node = &root_;
  int64_t page = 0;
  while (page < max_pages) {
    const int32_t* key = tokens.data() + page * page_size_;
    auto it = node->children.find(std::vector<int32_t>(key, key + page_size_));
    if (it == node->children.end()) break;
    RadixNode* child = it->second.get();
    child->last_access = tick_;
    int64_t k = 0;
    while (k < child->num_pages() && page + k < max_pages &&
           std::equal(key + k * page_size_, key + (k + 1) * page_size_, child->tokens.begin() + k * page_size_))
      ++k;
    for (int g = 0; g < num_groups; ++g)
      match.pages[g].insert(match.pages[g].end(), child->pages[g].begin(), child->pages[g].begin() + k);
    page_node.insert(page_node.end(), k, child);
    page += k;
    if (k < child->num_pages()) break;
    node = child;
  }

  // Walk back from the full match to the longest point whose window tails are resident in every window group.
  int64_t usable = page;
  for (int g = 0; g < num_groups; ++g) {
    if (windows_[g] == 0) continue;
    std::vector<int64_t> last_missing(page, -1);  // [p] last page <= p that is not resident
    for (int64_t p = 0; p < page; ++p) last_missing[p] = match.pages[g][p] < 0 ? p : (p > 0 ? last_missing[p - 1] : -1);
    while (usable > 0 &&
           last_missing[usable - 1] >= window_first_position(windows_[g], usable * page_size_) / page_size_)
      --usable;
  }
  match.num_tokens = usable * page_size_;
  match.node = usable > 0 ? page_node[usable - 1] : &root_;
  // Split a partly matched node so that the caller locks only the matched pages: locking the whole node would pin
  // its unmatched rest too, which then counts as neither evictable nor reused.
  if (usable > 0) {
    const int64_t pages_in_node = usable - match.node->start / page_size_;
    if (pages_in_node < match.node->num_pages()) match.node = split(match.node, pages_in_node);
  }
  for (int g = 0; g < num_groups; ++g) {
    match.pages[g].resize(usable);
    const int64_t first = window_first_position(windows_[g], match.num_tokens) / page_size_;
    std::fill(match.pages[g].begin(), match.pages[g].begin() + first, -1);
  }
  return match;
}

RadixNode* RadixCache::split(RadixNode* node, int64_t num_pages) {
  RS_DCHECK(num_pages > 0 && num_pages < node->num_pages(), "bad split");
  RadixNode* parent = node->parent;
  auto key = first_page(*node);
  auto upper = std::make_unique<RadixNode>();
  const int64_t split_tokens = num_pages * page_size_;
  upper->tokens.assign(node->tokens.begin(), node->tokens.begin() + split_tokens);
  upper->pages.resize(windows_.size());
  for (size_t g = 0; g < windows_.size(); ++g) {
    upper->pages[g].assign(node->pages[g].begin(), node->pages[g].begin() + num_pages);
    node->pages[g].erase(node->pages[g].begin(), node->pages[g].begin() + num_pages);
  }
  node->tokens.erase(node->tokens.begin(), node->tokens.begin() + split_tokens);
  if (!node->hashes.empty()) {
    upper->hashes.assign(node->hashes.begin(), node->hashes.begin() + num_pages);
    node->hashes.erase(node->hashes.begin(), node->hashes.begin() + num_pages);
  }
  upper->start = node->start;
  node->start += split_tokens;
  upper->parent = parent;
  upper->lock_ref = node->lock_ref;  // every lock through node also runs through its new ancestor
  upper->last_access = node->last_access;
  // The lower part keeps its identity (requests may hold it locked); the upper part takes its slot in the parent.
  std::unique_ptr<RadixNode> lower = std::move(parent->children[key]);
  lower->parent = upper.get();
  upper->children.emplace(first_page(*lower), std::move(lower));
  RadixNode* result = upper.get();
  parent->children[key] = std::move(upper);
  ++num_nodes_;
  return result;
}

RadixNode* RadixCache::insert(std::span<const int32_t> tokens, const std::vector<std::vector<int32_t>>& pages) {
  const int num_groups = static_cast<int>(windows_.size());
  RS_CHECK(tokens.size() % page_size_ == 0, "insert of {} tokens: not page-aligned", tokens.size());
  const int64_t total_pages = static_cast<int64_t>(tokens.size()) / page_size_;
  RS_CHECK(static_cast<int>(pages.size()) == num_groups, "insert: {} page lists for {} groups", pages.size(),
           num_groups);
  for (int g = 0; g < num_groups; ++g)
    RS_CHECK(static_cast<int64_t>(pages[g].size()) >= total_pages, "insert: group {} has too few pages", g);
  ++tick_;
  RadixNode* node = &root_;
  int64_t page = 0;
  while (page < total_pages) {
    const int32_t* key = tokens.data() + page * page_size_;
    auto it = node->children.find(std::vector<int32_t>(key, key + page_size_));
    if (it == node->children.end()) {
      auto child = std::make_unique<RadixNode>();
      child->tokens.assign(key, tokens.data() + tokens.size());
      child->pages.resize(num_groups);
      for (int g = 0; g < num_groups; ++g) {
        child->pages[g].assign(pages[g].begin() + page, pages[g].begin() + total_pages);
        for (int32_t id : child->pages[g]) {
          RS_CHECK(id >= 0 || windows_[g] > 0, "insert: full-attention group {} is missing a page", g);
          if (id < 0) continue;
          allocators_[g].ref(id);
          ++held_pages_[g];
        }
      }
      child->start = page * page_size_;
      child->parent = node;
      child->last_access = tick_;
      RadixNode* result = child.get();
      node->children.emplace(std::vector<int32_t>(key, key + page_size_), std::move(child));
      ++num_nodes_;
      report_stored(result);
      return result;
    }
    RadixNode* child = it->second.get();
    int64_t k = 0;
    while (k < child->num_pages() && page + k < total_pages &&
           std::equal(key + k * page_size_, key + (k + 1) * page_size_, child->tokens.begin() + k * page_size_))
      ++k;
    if (k < child->num_pages()) child = split(child, k);
    child->last_access = tick_;
    for (int g = 0; g < num_groups; ++g) {
      if (windows_[g] == 0) continue;
      for (int64_t i = 0; i < k; ++i) {
        const int32_t id = pages[g][page + i];
        if (child->pages[g][i] >= 0 || id < 0) continue;
        allocators_[g].ref(id);
        child->pages[g][i] = id;
        ++held_pages_[g];
        if (child->lock_ref > 0) ++locked_pages_[g];
      }
    }
    page += k;
    node = child;
  }
  return node;
}

void RadixCache::set_event_sink(CacheEventSink* sink) {
  RS_CHECK(root_.children.empty(), "the KV event sink must be set while the prefix cache is empty");
  events_ = sink;
}

void RadixCache::report_stored(RadixNode* node) {
  if (!events_) return;
  const BlockHash* parent = node->parent == &root_ ? nullptr : &node->parent->hashes.back();
  node->hashes.resize(node->num_pages());
  for (int64_t p = 0; p < node->num_pages(); ++p) {
    const std::span<const int32_t> tokens(node->tokens.data() + p * page_size_, page_size_);
    node->hashes[p] = events_->hash_block(p == 0 ? parent : &node->hashes[p - 1], tokens);
  }
  events_->stored(parent, node->hashes, node->tokens);
}

void RadixCache::lock(RadixNode* node) {
  for (; node != nullptr && node != &root_; node = node->parent) {
    if (node->lock_ref++ > 0) continue;
    for (size_t g = 0; g < windows_.size(); ++g)
      locked_pages_[g] += std::count_if(node->pages[g].begin(), node->pages[g].end(), [](int32_t p) { return p >= 0; });
  }
}

void RadixCache::unlock(RadixNode* node) {
  for (; node != nullptr && node != &root_; node = node->parent) {
    RS_CHECK(node->lock_ref > 0, "unlock of a radix node that is not locked");
    if (--node->lock_ref > 0) continue;
    for (size_t g = 0; g < windows_.size(); ++g)
      locked_pages_[g] -= std::count_if(node->pages[g].begin(), node->pages[g].end(), [](int32_t p) { return p >= 0; });
  }
}

void RadixCache::remove_leaf(RadixNode* node) {
  RS_DCHECK(node->children.empty() && node->lock_ref == 0, "remove_leaf on a locked or inner node");
  detach_snapshot(node);
  for (size_t g = 0; g < windows_.size(); ++g) {
    for (int32_t id : node->pages[g]) {
      if (id < 0) continue;
      allocators_[g].unref(id);
      --held_pages_[g];
    }
  }
  if (events_ && removed_)
    removed_->insert(removed_->end(), node->hashes.begin(), node->hashes.end());
  else if (events_)
    events_->removed(node->hashes);
  node->parent->children.erase(first_page(*node));
  --num_nodes_;
}

int64_t RadixCache::evict_leaves(int group, int64_t num_pages) {
  auto older = [](const RadixNode* a, const RadixNode* b) { return a->last_access > b->last_access; };
  std::priority_queue<RadixNode*, std::vector<RadixNode*>, decltype(older)> leaves(older);
  std::vector<RadixNode*> nodes;
  collect(root_, nodes);
  for (RadixNode* node : nodes)
    if (node->children.empty() && node->lock_ref == 0) leaves.push(node);
  const int64_t free_before = allocators_[group].num_free();
  while (!leaves.empty() && allocators_[group].num_free() - free_before < num_pages) {
    RadixNode* leaf = leaves.top();
    leaves.pop();
    RadixNode* parent = leaf->parent;
    remove_leaf(leaf);
    if (parent != &root_ && parent->children.empty() && parent->lock_ref == 0) leaves.push(parent);
  }
  return allocators_[group].num_free() - free_before;
}

int64_t RadixCache::drop_window_pages(int group, int64_t num_pages) {
  std::vector<RadixNode*> nodes;
  collect(root_, nodes);
  std::stable_sort(nodes.begin(), nodes.end(),
                   [](const RadixNode* a, const RadixNode* b) { return a->last_access < b->last_access; });
  int64_t freed = 0;
  for (RadixNode* node : nodes) {
    for (int32_t& id : node->pages[group]) {
      if (freed >= num_pages) break;
      if (id < 0 || allocators_[group].ref_count(id) != 1) continue;
      allocators_[group].unref(id);
      id = -1;
      --held_pages_[group];
      if (node->lock_ref > 0) --locked_pages_[group];
      ++freed;
    }
  }
  if (!has_full_group()) {
    // Without a full-attention group, a node whose pages are all gone holds nothing reusable.
    auto empty = [&](const RadixNode* node) {
      for (const auto& group_pages : node->pages)
        if (std::any_of(group_pages.begin(), group_pages.end(), [](int32_t p) { return p >= 0; })) return false;
      return true;
    };
    std::vector<RadixNode*> all;
    collect(root_, all);
    for (auto it = all.rbegin(); it != all.rend(); ++it)  // children come after parents in `all`
      if ((*it)->children.empty() && (*it)->lock_ref == 0 && empty(*it)) remove_leaf(*it);
  }
  return freed;
}

int64_t RadixCache::evict(int group, int64_t num_pages) {
  if (num_pages <= 0) return 0;
  return windows_[group] > 0 ? drop_window_pages(group, num_pages) : evict_leaves(group, num_pages);
}

void RadixCache::detach_snapshot(RadixNode* node) {
  if (node->state_snapshot < 0) return;
  const int32_t slot = node->state_snapshot;
  node->state_snapshot = -1;
  --num_snapshots_;
  if (release_snapshot_) release_snapshot_(slot);
}

bool RadixCache::attach_snapshot(std::span<const int32_t> tokens, int64_t end, int32_t slot) {
  RS_CHECK(slot >= 0, "snapshot slot {}", slot);
  if (end <= 0 || end % page_size_ != 0 || end > static_cast<int64_t>(tokens.size())) return false;
  const PrefixMatch match = match_prefix(tokens, end);  // splits the node that runs past `end`
  if (match.num_tokens != end || match.node->end() != end || match.node->state_snapshot >= 0) return false;
  match.node->state_snapshot = slot;
  ++num_snapshots_;
  return true;
}

bool RadixCache::drop_lru_snapshot() {
  if (num_snapshots_ == 0) return false;  // spares the walk while running sequences hold every slot
  std::vector<RadixNode*> nodes;
  collect(root_, nodes);
  RadixNode* oldest = nullptr;
  for (RadixNode* node : nodes)
    if (node->state_snapshot >= 0 && (!oldest || node->last_access < oldest->last_access)) oldest = node;
  if (!oldest) return false;
  detach_snapshot(oldest);
  return true;
}

void RadixCache::drop_snapshot(int32_t slot) {
  if (num_snapshots_ == 0) return;
  std::vector<RadixNode*> nodes;
  collect(root_, nodes);
  for (RadixNode* node : nodes)
    if (node->state_snapshot == slot) detach_snapshot(node);
}

bool RadixCache::drop_snapshot_at(std::span<const int32_t> tokens, int64_t end, int32_t slot) {
  if (num_snapshots_ == 0 || end <= 0 || end % page_size_ != 0 || end > static_cast<int64_t>(tokens.size()))
    return false;
  const PrefixMatch match = match_prefix(tokens, end);
  if (match.num_tokens != end || match.node->end() != end || match.node->state_snapshot != slot) return false;
  detach_snapshot(match.node);
  return true;
}

void RadixCache::evict_all() {
  // Reported as one event: cleared when nothing is left, else the pages that went (locked paths stay).
  std::vector<BlockHash> removed;
  removed_ = &removed;
  try {
    for (size_t g = 0; g < windows_.size(); ++g) evict(static_cast<int>(g), INT64_MAX);
  } catch (...) {
    removed_ = nullptr;  // never left pointing at this frame
    throw;
  }
  removed_ = nullptr;
  if (!events_) return;
  if (root_.children.empty())
    events_->cleared();
  else if (!removed.empty())
    events_->removed(removed);
}

int64_t RadixCache::evictable_pages(int group) const {
  if (windows_[group] == 0) return held_pages_[group] - locked_pages_[group];
  std::vector<RadixNode*> nodes;
  collect(root_, nodes);
  int64_t count = 0;
  for (const RadixNode* node : nodes)
    for (int32_t id : node->pages[group])
      if (id >= 0 && allocators_[group].ref_count(id) == 1) ++count;
  return count;
}

}  // namespace rs::memory
