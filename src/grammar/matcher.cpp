#include "grammar/matcher.h"

#include <algorithm>

#include "base/error.h"

namespace rs::grammar {

GrammarMatcher::GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar, int32_t max_rollback)
    : grammar_(std::move(grammar)), pda_(grammar_->grammar()), max_rollback_(std::max(max_rollback, 0)) {
  history_.push_back(pda_.initial_state());
}

bool GrammarMatcher::advance_bytes(std::string_view bytes, PdaState& out) {
  PdaState scratch;
  out = history_.back();
  for (unsigned char byte : bytes) {
    pda_.advance(out, byte, scratch);
    if (!scratch.alive()) return false;
    std::swap(out, scratch);
  }
  return true;
}

bool GrammarMatcher::accept_bytes(std::string_view bytes) {
  PdaState next;
  if (!advance_bytes(bytes, next)) return false;
  history_.push_back(std::move(next));
  if (static_cast<int32_t>(history_.size()) > max_rollback_ + 1) history_.pop_front();
  return true;
}

bool GrammarMatcher::accept_token(int32_t token_id) {
  const std::string& bytes = grammar_->vocab().token_bytes(token_id);
  return !bytes.empty() && accept_bytes(bytes);
}

void GrammarMatcher::rollback(int32_t num_tokens) {
  RS_CHECK(num_tokens >= 0 && num_tokens <= num_rollback_states(), "cannot roll back {} tokens ({} kept)", num_tokens,
           num_rollback_states());
  history_.resize(history_.size() - num_tokens);
}

void GrammarMatcher::fill_next_token_bitmask(std::span<uint32_t> bitmask, std::span<const int32_t> stop_ids) {
  const PdaState& state = history_.back();
  key_.clear();
  pda_.append_key(state, key_);
  std::optional<std::vector<uint32_t>> cached = grammar_->cached_mask(key_);
  if (!cached) {
    cached.emplace();
    compute_mask(state, *cached);
    grammar_->cache_mask(key_, *cached);
  }
  const size_t n = std::min(bitmask.size(), cached->size());
  std::copy_n(cached->begin(), n, bitmask.begin());
  std::fill(bitmask.begin() + n, bitmask.end(), 0u);
  const int64_t limit = static_cast<int64_t>(bitmask.size()) * 32;
  if (state.accepting)
    for (int32_t id : stop_ids)
      if (id >= 0 && id < limit) bitmask[id >> 5] |= 1u << (id & 31);
}

// Walks the vocabulary trie in preorder, advancing the automaton one byte per edge; a dead state skips its subtree.
void GrammarMatcher::compute_mask(const PdaState& state, std::vector<uint32_t>& mask) {
  const TokenVocab& vocab = grammar_->vocab();
  const std::vector<TrieNode>& trie = vocab.trie();
  const std::vector<int32_t>& tokens = vocab.trie_tokens();
  mask.assign(bitmask_words(vocab.size()), 0u);
  if (levels_.empty()) levels_.resize(64);
  levels_[0] = state;
  for (uint32_t i = 0; i < trie.size();) {
    const TrieNode& node = trie[i];
    if (node.depth >= levels_.size()) levels_.resize(node.depth + 1);
    PdaState& next = levels_[node.depth];
    pda_.advance(levels_[node.depth - 1], node.byte, next);
    if (!next.alive()) {
      i = node.subtree_end;
      continue;
    }
    for (uint32_t t = node.tokens_begin; t < node.tokens_end; ++t) mask[tokens[t] >> 5] |= 1u << (tokens[t] & 31);
    i = next.entries.empty() ? node.subtree_end : i + 1;
  }
}

}  // namespace rs::grammar
