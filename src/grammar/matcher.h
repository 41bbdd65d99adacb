// GrammarMatcher: one request's position in a CompiledGrammar. Advances by tokens, rolls back (for speculative
// decoding), and fills the bitmask of tokens that may come next. Not thread-safe: one thread (the scheduler) owns it.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "grammar/compiled_grammar.h"
#include "grammar/pda.h"

namespace rs::grammar {

// Words of a token bitmask over `vocab_size` ids: bit (id % 32) of word id / 32 is set when id is allowed.
inline int32_t bitmask_words(int64_t vocab_size) { return static_cast<int32_t>((vocab_size + 31) / 32); }

class GrammarMatcher {
 public:
  // Keeps the last `max_rollback` tokens' states for rollback(). max_total_work: see kMaxTotalWork.
  explicit GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar, int32_t max_rollback = 16,
                          uint64_t max_total_work = kMaxTotalWork);

  // Advances by the token's bytes; false (and no change) when the grammar does not allow them (special tokens: unless
  // the grammar spells them out, special_token_bytes).
  bool accept_token(int32_t token_id);
  // Advances by raw bytes; false (and no change) when not allowed. Counts as one token for rollback.
  bool accept_bytes(std::string_view bytes);
  // Undoes the last `num_tokens` accepted tokens (at most max_rollback, and no more than were accepted).
  void rollback(int32_t num_tokens);
  int32_t num_rollback_states() const { return static_cast<int32_t>(history_.size()) - 1; }

  // The output so far is a complete sentence (a stop token may end it).
  bool can_finish() const { return history_.back().accepting; }
  // Complete, and nothing more may follow: the request should end now.
  bool terminated() const { return history_.back().entries.empty(); }

  // Fills `bitmask` (bitmask_words(vocab) words, vocab >= 1) with the tokens that may come next: those whose bytes
  // keep the grammar alive, plus `stop_ids` when the output can finish. Ids past the tokenizer's vocabulary are 0.
  // Throws rs::Error ("grammar too complex: ...") when the mask needs more than kMaxWork automaton steps.
  void fill_next_token_bitmask(std::span<uint32_t> bitmask, std::span<const int32_t> stop_ids);

  // Automaton work allowed for one mask, one accepted token, or the initial state, in closure steps (Pda::reset_work):
  // the matcher's unit of work, 6-10 ns each, where a mask's time tracks neither the vocabulary nor the state's size
  // alone. Masks run on the scheduler thread that every request shares, so this caps one grammar's stall of the
  // others near 0.3 s. Ordinary grammars stay far below: json_object's costliest mask over Qwen3's 151k tokens is
  // 4.4M steps (25 ms); (.{0,10}){10} needs 65M for its first mask over a 4k vocabulary, and billions later.
  static constexpr uint64_t kMaxWork = uint64_t{1} << 25;
  // Automaton work allowed over the matcher's whole life (one request): a grammar whose every mask stays just under
  // kMaxWork would otherwise slow every step of every request for as long as it generates. 2^32 steps is 30-40 s of
  // the scheduler thread, far above what ordinary grammars spend in a long answer (their masks are cached by state);
  // past it, the next mask or token throws "grammar too complex".
  static constexpr uint64_t kMaxTotalWork = uint64_t{1} << 32;
  uint64_t total_work() const { return total_work_ + pda_.work(); }

 private:
  bool advance_bytes(std::string_view bytes, PdaState& out);
  // Starts one mask's or token's work budget, adding the last one's work to the total; throws past max_total_work_.
  void begin_work();
  // The mask of `state`: the union of its entries' local masks, with their uncertain tokens tried on the whole state;
  // a state whose local masks leave too many tokens uncertain walks the trie itself (walk_trie).
  void compute_mask(const PdaState& state, std::vector<uint32_t>& mask);
  std::shared_ptr<const LocalMask> local_mask(const PdaEntry& entry);
  // Walks the vocabulary trie from `start`: accepted tokens into `mask`; with `uncertain`, tokens that cross a local
  // boundary before their last byte go there instead of being rejected.
  void walk_trie(const PdaState& start, std::vector<uint32_t>& mask, std::vector<int32_t>* uncertain);
  bool accepts_from(const PdaState& state, std::string_view bytes);

  std::shared_ptr<const CompiledGrammar> grammar_;
  Pda pda_;
  int32_t max_rollback_;
  uint64_t max_total_work_;
  uint64_t total_work_ = 0;       // of the operations before the current one
  std::deque<PdaState> history_;  // back() is the current state
  std::vector<PdaState> levels_;  // trie walk scratch: the state after each depth's byte
  std::vector<uint8_t> crossed_;  // trie walk scratch: a boundary was crossed at or above each depth
  PdaState scratch_a_, scratch_b_;
  std::string key_;
};

}  // namespace rs::grammar
