#include "grammar/compiled_grammar.h"

namespace rs::grammar {

std::optional<std::vector<uint32_t>> CompiledGrammar::cached_mask(const std::string& state_key) const {
  std::lock_guard lock(mutex_);
  const auto it = masks_.find(state_key);
  if (it == masks_.end()) return std::nullopt;
  return it->second;
}

void CompiledGrammar::cache_mask(const std::string& state_key, const std::vector<uint32_t>& mask) const {
  const size_t bytes = mask.size() * sizeof(uint32_t) + state_key.size();
  std::lock_guard lock(mutex_);
  if (cached_bytes_ + bytes > kMaxCachedMaskBytes) {
    masks_.clear();
    cached_bytes_ = 0;
  }
  if (masks_.emplace(state_key, mask).second) cached_bytes_ += bytes;
}

}  // namespace rs::grammar
