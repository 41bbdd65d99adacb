#include "grammar/matcher.h"

#include <algorithm>

#include "base/error.h"

namespace rs::grammar {

GrammarMatcher::GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar, int32_t max_rollback,
                               uint64_t max_total_work)
    : grammar_(std::move(grammar)),
      pda_(grammar_->grammar()),
      max_rollback_(std::max(max_rollback, 0)),
      max_total_work_(max_total_work) {
  pda_.reset_work(kMaxWork);
  history_.push_back(pda_.initial_state());
}

void GrammarMatcher::begin_work() {
  total_work_ += pda_.work();
  pda_.reset_work(kMaxWork);
  if (total_work_ > max_total_work_)
    RS_FAIL("grammar too complex: this request's token masks and tokens took over {} automaton steps in all",
            max_total_work_);
}

bool GrammarMatcher::advance_bytes(std::string_view bytes, PdaState& out) {
  PdaState scratch;
  begin_work();
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
    begin_work();
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

namespace {

// Return nodes a local entry keeps (Pda::localize): enough to hold a JSON string's body and its closing quote, so a
// string's mask is shared by every string of the schema, whatever object or array holds it.
constexpr int kLocalDepth = 2;
// Past this many uncertain tokens in a state, trying them one by one costs more than walking the trie from it.
constexpr size_t kMaxUncertain = 4096;

void set_bit(std::vector<uint32_t>& mask, int32_t id) { mask[id >> 5] |= 1u << (id & 31); }
bool has_bit(const std::vector<uint32_t>& mask, int32_t id) { return (mask[id >> 5] >> (id & 31)) & 1u; }

}  // namespace

std::shared_ptr<const LocalMask> GrammarMatcher::local_mask(const PdaEntry& entry) {
  std::string key;
  const PdaEntry local = pda_.localize(entry, kLocalDepth, key);
  if (auto cached = grammar_->cached_local_mask(key)) return cached;
  auto mask = std::make_shared<LocalMask>();
  PdaState start;
  start.entries.push_back(local);
  walk_trie(start, mask->accepted, &mask->uncertain);
  grammar_->cache_local_mask(key, mask);
  return mask;
}

// As xgrammar does: tokens an entry decides within its local context are cached per local entry (shared by every
// state, in any request, that holds it); only the tokens that leave the context are tried against the whole state.
void GrammarMatcher::compute_mask(const PdaState& state, std::vector<uint32_t>& mask) {
  std::vector<std::shared_ptr<const LocalMask>> locals;
  size_t uncertain = 0;
  for (const PdaEntry& entry : state.entries) {
    locals.push_back(local_mask(entry));
    uncertain += locals.back()->uncertain.size();
    if (uncertain > kMaxUncertain) return walk_trie(state, mask, nullptr);
  }
  const TokenVocab& vocab = grammar_->vocab();
  mask.assign(bitmask_words(vocab.size()), 0u);
  for (const auto& local : locals)
    for (size_t w = 0; w < mask.size(); ++w) mask[w] |= local->accepted[w];
  for (const auto& local : locals)
    for (int32_t id : local->uncertain)
      if (!has_bit(mask, id) && accepts_from(state, vocab.token_bytes(id))) set_bit(mask, id);
}

bool GrammarMatcher::accepts_from(const PdaState& state, std::string_view bytes) {
  const PdaState* from = &state;
  for (size_t i = 0; i < bytes.size(); ++i) {
    PdaState& to = from == &scratch_a_ ? scratch_b_ : scratch_a_;
    pda_.advance(*from, static_cast<uint8_t>(bytes[i]), to);
    if (!to.alive()) return false;
    from = &to;
  }
  return true;
}

// Walks the vocabulary trie in preorder, advancing the automaton one byte per edge; a dead state skips its subtree.
void GrammarMatcher::walk_trie(const PdaState& start, std::vector<uint32_t>& mask, std::vector<int32_t>* uncertain) {
  const TokenVocab& vocab = grammar_->vocab();
  const std::vector<TrieNode>& trie = vocab.trie();
  const std::vector<int32_t>& tokens = vocab.trie_tokens();
  mask.assign(bitmask_words(vocab.size()), 0u);
  if (levels_.size() < 64) {
    levels_.resize(64);
    crossed_.resize(64);
  }
  levels_[0] = start;
  crossed_[0] = 0;
  for (uint32_t i = 0; i < trie.size();) {
    const TrieNode& node = trie[i];
    const uint32_t depth = node.depth;
    if (depth >= levels_.size()) {
      levels_.resize(depth + 1);
      crossed_.resize(depth + 1);
    }
    PdaState& next = levels_[depth];
    pda_.advance(levels_[depth - 1], node.byte, next);
    // A token whose last byte ends the local context (boundary) is valid whatever follows; one that left it earlier
    // (crossed above this depth) depends on the stack below.
    crossed_[depth] = crossed_[depth - 1] || next.boundary;
    const bool accepted = next.alive() || next.boundary;
    for (uint32_t t = node.tokens_begin; t < node.tokens_end; ++t) {
      if (accepted)
        set_bit(mask, tokens[t]);
      else if (uncertain && crossed_[depth - 1])
        uncertain->push_back(tokens[t]);
    }
    if (next.entries.empty()) {
      if (uncertain && crossed_[depth])
        for (uint32_t j = i + 1; j < node.subtree_end; ++j)
          for (uint32_t t = trie[j].tokens_begin; t < trie[j].tokens_end; ++t) uncertain->push_back(tokens[t]);
      i = node.subtree_end;
      continue;
    }
    ++i;
  }
}

}  // namespace rs::grammar
