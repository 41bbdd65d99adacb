// BpeCache: bounded, lock-free memo of piece -> token ids, shared by all encoding threads.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace rs::tokenizer {

// A fixed open-addressing table of immutable entries. Readers take no lock (one acquire load per
// probe); writers publish with compare-and-swap. Entries are never replaced or freed before the
// cache dies, so a reader never sees one disappear. Once a key's probe window is full it is not
// cached (HF's BPE cache also stops inserting when full); memory stays bounded by the capacity.
class BpeCache {
 public:
  // Pieces longer than this many bytes are not cached (rarely repeated, costly to hash).
  static constexpr std::size_t kMaxPieceBytes = 256;

  explicit BpeCache(std::size_t capacity_pieces);
  ~BpeCache();
  BpeCache(const BpeCache&) = delete;
  BpeCache& operator=(const BpeCache&) = delete;

  // Appends the cached ids of `piece` to `out` and returns true on a hit. Thread-safe.
  bool lookup(std::string_view piece, std::vector<int32_t>& out) const;

  // Remembers `ids` for `piece` if there is room. Thread-safe.
  void insert(std::string_view piece, std::span<const int32_t> ids) const;

 private:
  static constexpr std::size_t kMaxProbes = 8;
  struct Entry {
    uint64_t hash;
    std::string piece;
    std::vector<int32_t> ids;
  };

  std::size_t mask_;                                    // number of slots - 1 (a power of two)
  std::unique_ptr<std::atomic<const Entry*>[]> slots_;  // owning: freed in the destructor
};

}  // namespace rs::tokenizer
