// Flat open-addressing string -> id table with linear probing.
#include "tokenizer/token_map.h"

#include <cstring>
#include <functional>

#include "base/error.h"

namespace rs::tokenizer {

void TokenMap::grow() {
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(old.empty() ? 64 : old.size() * 2, Slot{0, 0, kEmpty, 0});
  const std::size_t mask = slots_.size() - 1;
  for (const Slot& slot : old) {
    if (slot.length == kEmpty) continue;
    const uint64_t hash = std::hash<std::string_view>{}(std::string_view(keys_).substr(slot.offset, slot.length));
    std::size_t i = hash & mask;
    while (slots_[i].length != kEmpty) i = (i + 1) & mask;
    slots_[i] = slot;
  }
}

void TokenMap::insert(std::string_view key, int32_t id) {
  RS_CHECK(keys_.size() + key.size() < kEmpty, "TokenMap: keys exceed 4 GiB");
  if ((size_ + 1) * 2 > slots_.size()) grow();
  const uint64_t hash = std::hash<std::string_view>{}(key);
  const std::size_t mask = slots_.size() - 1;
  for (std::size_t i = hash & mask;; i = (i + 1) & mask) {
    Slot& slot = slots_[i];
    if (slot.length == kEmpty) {
      slot = Slot{static_cast<uint32_t>(hash >> 32), static_cast<uint32_t>(keys_.size()),
                  static_cast<uint32_t>(key.size()), id};
      keys_.append(key);
      ++size_;
      return;
    }
    if (slot.hash_high == static_cast<uint32_t>(hash >> 32) && slot.length == key.size() &&
        std::memcmp(keys_.data() + slot.offset, key.data(), key.size()) == 0) {
      return;
    }
  }
}

std::optional<int32_t> TokenMap::find(std::string_view key) const {
  if (slots_.empty()) return std::nullopt;
  const uint64_t hash = std::hash<std::string_view>{}(key);
  const auto high = static_cast<uint32_t>(hash >> 32);
  const std::size_t mask = slots_.size() - 1;
  for (std::size_t i = hash & mask;; i = (i + 1) & mask) {
    const Slot& slot = slots_[i];
    if (slot.length == kEmpty) return std::nullopt;
    if (slot.hash_high == high && slot.length == key.size() &&
        std::memcmp(keys_.data() + slot.offset, key.data(), key.size()) == 0) {
      return slot.id;
    }
  }
}

}  // namespace rs::tokenizer
