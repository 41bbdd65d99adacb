// BPE merging of one word: a merge table keyed by token-id pairs and the heap-driven merge loop.
#pragma once

#include <cstdint>
#include <vector>

namespace rs::tokenizer {

struct MergeRule {
  int32_t rank;    // position in the merges list: lower merges first
  int32_t new_id;  // id of the merged token
};

// Open-addressing hash table (left id, right id) -> MergeRule.
class MergeTable {
 public:
  void reserve(std::size_t num_merges);
  // A later insert of the same pair overwrites the earlier one (as HF's HashMap collect does).
  void insert(int32_t left, int32_t right, MergeRule rule);
  const MergeRule* find(int32_t left, int32_t right) const;
  std::size_t size() const { return size_; }

 private:
  struct Slot {
    uint64_t key;  // kEmpty when unused
    MergeRule rule;
  };
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  std::size_t slot_of(uint64_t key) const;

  std::vector<Slot> slots_;
  std::size_t size_ = 0;
};

// Merges the symbols of one word (token ids, in order) exactly as HF's Word::merge_all: always the
// pair with the lowest rank, the leftmost on ties; O(n log n) with a heap and a linked list, so
// a 100k-symbol word is fast. Appends the final ids to `out`.
void merge_word(const std::vector<int32_t>& symbols, const MergeTable& merges, std::vector<int32_t>& out);

}  // namespace rs::tokenizer
