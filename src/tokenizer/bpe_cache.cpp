// Lock-free fill-once BPE result cache.
#include "tokenizer/bpe_cache.h"

#include <functional>

namespace rs::tokenizer {

BpeCache::BpeCache(std::size_t capacity_pieces) {
  std::size_t slots = 16;
  while (slots < capacity_pieces) slots *= 2;
  mask_ = slots - 1;
  slots_ = std::make_unique<std::atomic<const Entry*>[]>(slots);
  for (std::size_t i = 0; i < slots; ++i) slots_[i].store(nullptr, std::memory_order_relaxed);
}

BpeCache::~BpeCache() {
  for (std::size_t i = 0; i <= mask_; ++i) {
    std::unique_ptr<const Entry> owned(slots_[i].load(std::memory_order_relaxed));
  }
}

bool BpeCache::lookup(std::string_view piece, std::vector<int32_t>& out) const {
  if (piece.size() > kMaxPieceBytes) return false;
  const uint64_t hash = std::hash<std::string_view>{}(piece);
  for (std::size_t probe = 0; probe < kMaxProbes; ++probe) {
    const Entry* entry = slots_[(hash + probe) & mask_].load(std::memory_order_acquire);
    if (entry == nullptr) return false;
    if (entry->hash == hash && entry->piece == piece) {
      out.insert(out.end(), entry->ids.begin(), entry->ids.end());
      return true;
    }
  }
  return false;
}

void BpeCache::insert(std::string_view piece, std::span<const int32_t> ids) const {
  if (piece.size() > kMaxPieceBytes) return;
  const uint64_t hash = std::hash<std::string_view>{}(piece);
  auto entry = std::make_unique<Entry>(Entry{hash, std::string(piece), std::vector<int32_t>(ids.begin(), ids.end())});
  for (std::size_t probe = 0; probe < kMaxProbes; ++probe) {
    const Entry* expected = nullptr;
    std::atomic<const Entry*>& slot = slots_[(hash + probe) & mask_];
    if (slot.compare_exchange_strong(expected, entry.get(), std::memory_order_acq_rel)) {
      entry.release();  // now owned by the table
      return;
    }
    if (expected->hash == hash && expected->piece == piece) return;  // another thread won
  }
}

}  // namespace rs::tokenizer
