// CompiledGrammar: a lowered Grammar bound to a tokenizer's vocabulary, with the token masks computed so far
// (shared by every matcher of the grammar). Immutable after construction except the mask cache, which locks.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/vocab.h"

namespace rs::grammar {

// The tokens one local entry (Pda::localize) decides on its own: accepted whatever the stack below, or to be tried on
// the whole state (they leave the local context before their last byte); every other token is rejected.
struct LocalMask {
  std::vector<uint32_t> accepted;  // bitmask words over the vocabulary
  std::vector<int32_t> uncertain;  // token ids
};

class CompiledGrammar {
 public:
  CompiledGrammar(Grammar grammar, std::shared_ptr<const TokenVocab> vocab)
      : grammar_(std::move(grammar)), vocab_(std::move(vocab)) {}

  const Grammar& grammar() const { return grammar_; }
  const TokenVocab& vocab() const { return *vocab_; }

  // The cached mask (words over vocab().size()) for a matcher state key (Pda::append_key), if computed before.
  std::optional<std::vector<uint32_t>> cached_mask(const std::string& state_key) const;
  // Stores a mask; the cache is dropped whole when it would exceed kMaxCachedMaskBytes.
  void cache_mask(const std::string& state_key, const std::vector<uint32_t>& mask) const;

  // The same for local entries' masks (xgrammar's context-independent tokens), shared by every state holding one.
  std::shared_ptr<const LocalMask> cached_local_mask(const std::string& local_key) const;
  void cache_local_mask(const std::string& local_key, std::shared_ptr<const LocalMask> mask) const;

  static constexpr size_t kMaxCachedMaskBytes = size_t{64} << 20;

  // The server's admission check of this grammar (its first masks fit GrammarMatcher::kMaxWork), kept with it so
  // that a repeated request is answered without walking the automaton again: nullopt until checked, then the
  // refusal's message (empty: admitted).
  std::optional<std::string> admission_verdict() const;
  void set_admission_verdict(std::string refusal) const;

 private:
  Grammar grammar_;
  std::shared_ptr<const TokenVocab> vocab_;
  mutable std::mutex mutex_;
  mutable std::unordered_map<std::string, std::vector<uint32_t>> masks_;
  mutable std::unordered_map<std::string, std::shared_ptr<const LocalMask>> local_masks_;
  mutable size_t cached_bytes_ = 0;
  mutable std::optional<std::string> admission_;
};

}  // namespace rs::grammar
