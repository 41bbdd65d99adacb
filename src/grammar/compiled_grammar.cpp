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
    local_masks_.clear();
    cached_bytes_ = 0;
  }
  if (masks_.emplace(state_key, mask).second) cached_bytes_ += bytes;
}

std::shared_ptr<const LocalMask> CompiledGrammar::cached_local_mask(const std::string& local_key) const {
  std::lock_guard lock(mutex_);
  const auto it = local_masks_.find(local_key);
  return it == local_masks_.end() ? nullptr : it->second;
}

void CompiledGrammar::cache_local_mask(const std::string& local_key, std::shared_ptr<const LocalMask> mask) const {
  const size_t bytes = (mask->accepted.size() + mask->uncertain.size()) * 4 + local_key.size();
  std::lock_guard lock(mutex_);
  if (cached_bytes_ + bytes > kMaxCachedMaskBytes) {
    masks_.clear();
    local_masks_.clear();
    cached_bytes_ = 0;
  }
  if (local_masks_.emplace(local_key, std::move(mask)).second) cached_bytes_ += bytes;
}

std::optional<std::string> CompiledGrammar::admission_verdict() const {
  std::lock_guard lock(mutex_);
  return admission_;
}

void CompiledGrammar::set_admission_verdict(std::string refusal) const {
  std::lock_guard lock(mutex_);
  admission_ = std::move(refusal);
}

}  // namespace rs::grammar
