// TokenMap: a read-only flat hash table string -> token id (one probe array, one byte buffer),
// about two cache misses per lookup where a node-based map takes several.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rs::tokenizer {

class TokenMap {
 public:
  // Adds `key` -> `id` before the first find(); a repeated key keeps its first id.
  void insert(std::string_view key, int32_t id);
  std::optional<int32_t> find(std::string_view key) const;
  std::size_t size() const { return size_; }

 private:
  struct Slot {
    uint32_t hash_high;  // upper hash bits, to skip most byte comparisons
    uint32_t offset;     // key bytes in keys_
    uint32_t length;     // kEmpty for a free slot
    int32_t id;
  };
  static constexpr uint32_t kEmpty = ~uint32_t{0};
  void grow();

  std::vector<Slot> slots_;
  std::string keys_;
  std::size_t size_ = 0;
};

}  // namespace rs::tokenizer
