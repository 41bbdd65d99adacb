// MergeTable and merge_word (HF tokenizers models/bpe/word.rs semantics).
#include "tokenizer/bpe_merge.h"

#include <queue>

namespace rs::tokenizer {
namespace {

uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

struct Candidate {
  int32_t rank;
  int32_t pos;     // index of the left symbol
  int32_t new_id;  // the merge this entry was queued for (stale if the pair changed since)
};

// std::priority_queue pops the "largest": make that the lowest rank, then the leftmost.
struct LaterFirst {
  bool operator()(const Candidate& a, const Candidate& b) const {
    return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
  }
};

struct Symbol {
  int32_t id;
  int32_t prev;  // -1 at the start
  int32_t next;  // -1 at the end
  bool removed;  // merged into its left neighbour
};

}  // namespace

std::size_t MergeTable::slot_of(uint64_t key) const {
  // Fibonacci hashing spreads the id pairs over the power-of-two table.
  return static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ull) >> 20) & (slots_.size() - 1);
}

void MergeTable::reserve(std::size_t num_merges) {
  std::size_t capacity = 16;
  while (capacity < num_merges * 2) capacity *= 2;
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(capacity, Slot{kEmpty, {}});
  size_ = 0;
  for (const Slot& slot : old) {
    if (slot.key != kEmpty) {
      insert(static_cast<int32_t>(slot.key >> 32), static_cast<int32_t>(slot.key & 0xFFFFFFFF), slot.rule);
    }
  }
}

void MergeTable::insert(int32_t left, int32_t right, MergeRule rule) {
  if ((size_ + 1) * 2 > slots_.size()) reserve(size_ + 1);
  const uint64_t key = pair_key(left, right);
  for (std::size_t i = slot_of(key);; i = (i + 1) & (slots_.size() - 1)) {
    if (slots_[i].key == key) {
      slots_[i].rule = rule;
      return;
    }
    if (slots_[i].key == kEmpty) {
      slots_[i] = Slot{key, rule};
      ++size_;
      return;
    }
  }
}

const MergeRule* MergeTable::find(int32_t left, int32_t right) const {
  if (slots_.empty()) return nullptr;
  const uint64_t key = pair_key(left, right);
  for (std::size_t i = slot_of(key);; i = (i + 1) & (slots_.size() - 1)) {
    if (slots_[i].key == key) return &slots_[i].rule;
    if (slots_[i].key == kEmpty) return nullptr;
  }
}

void merge_word(const std::vector<int32_t>& ids, const MergeTable& merges, std::vector<int32_t>& out) {
  const auto count = static_cast<int32_t>(ids.size());
  if (count == 0) return;
  if (count == 1) {
    out.push_back(ids[0]);
    return;
  }
  std::vector<Symbol> symbols(ids.size());
  std::vector<Candidate> storage;
  storage.reserve(ids.size());
  for (int32_t i = 0; i < count; ++i) {
    symbols[i] = Symbol{ids[i], i - 1, i + 1 < count ? i + 1 : -1, false};
    if (i + 1 < count) {
      if (const MergeRule* rule = merges.find(ids[i], ids[i + 1])) {
        storage.push_back({rule->rank, i, rule->new_id});
      }
    }
  }
  std::priority_queue<Candidate, std::vector<Candidate>, LaterFirst> queue(LaterFirst{}, std::move(storage));
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& left = symbols[top.pos];
    if (left.removed || left.next < 0) continue;
    const Symbol right = symbols[left.next];
    // Skip entries queued for a pair that has changed since.
    const MergeRule* rule = merges.find(left.id, right.id);
    if (rule == nullptr || rule->new_id != top.new_id) continue;

    left.id = top.new_id;
    symbols[left.next].removed = true;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = top.pos;

    if (left.prev >= 0) {
      if (const MergeRule* with_prev = merges.find(symbols[left.prev].id, left.id)) {
        queue.push({with_prev->rank, left.prev, with_prev->new_id});
      }
    }
    if (left.next >= 0) {
      if (const MergeRule* with_next = merges.find(left.id, symbols[left.next].id)) {
        queue.push({with_next->rank, top.pos, with_next->new_id});
      }
    }
  }
  for (int32_t i = 0; i >= 0; i = symbols[i].next) out.push_back(symbols[i].id);
}

}  // namespace rs::tokenizer
