// Pda: the pushdown automaton that runs a Grammar byte by byte. A state is the set of places the input may be in:
// each a byte-set element to match next plus a return continuation (a hash-consed stack node), so stacks share tails.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "grammar/grammar.h"

namespace rs::grammar {

// One way the input can continue: match elements[pos] (a byte set), then go on as `parent` says (-1: the root ends).
struct PdaEntry {
  uint32_t pos = 0;
  int32_t parent = -1;
  bool operator==(const PdaEntry&) const = default;
};

struct PdaState {
  std::vector<PdaEntry> entries;  // no duplicates
  bool accepting = false;         // the input so far is a complete sentence
  bool boundary = false;          // some path returned past a local context's end (Pda::localize)
  // Alive: some continuation exists or the input is complete.
  bool alive() const { return accepting || !entries.empty(); }
};

class Pda {
 public:
  explicit Pda(const Grammar& grammar) : grammar_(&grammar) {}

  PdaState initial_state();
  // out = the state after `byte` from `from` (out's storage is reused). `from` and `out` must differ. Throws rs::Error
  // when one byte needs more than kMaxClosureSteps expansions (nested nullable repetitions such as (a{0,9999}){0,9999}
  // can), so such a grammar fails its request instead of stalling the scheduler.
  void advance(const PdaState& from, uint8_t byte, PdaState& out);
  static constexpr uint32_t kMaxClosureSteps = 1u << 20;
  // Work budget across many advances (one token mask, one accepted token), in closure steps: each costs about the
  // same (entries are deduplicated in O(1)), so work tracks CPU time whatever the grammar's shape. Past `budget`
  // steps, advance() throws rs::Error starting "grammar too complex".
  void reset_work(uint64_t budget) {
    work_ = 0;
    work_budget_ = budget;
  }
  uint64_t work() const { return work_; }  // since reset_work()
  // A key equal for states with the same entries (stacks compared by content), for caching across matchers.
  void append_key(const PdaState& state, std::string& key) const;
  // The entry with its stack cut below `depth` return nodes: what lies deeper becomes kBoundary, where a path that
  // returns sets PdaState::boundary instead of continuing. Appends a key naming the local entry (its position and the
  // kept return positions): entries with the same key accept the same tokens up to the boundary, whatever lies below.
  PdaEntry localize(const PdaEntry& entry, int depth, std::string& key);
  static constexpr int32_t kBoundary = -2;
  size_t num_nodes() const { return nodes_.size(); }

 private:
  struct Node {
    uint32_t pos;  // the element to continue with (never kEnd)
    int32_t parent;
  };
  void closure(uint32_t pos, int32_t parent, PdaState& out);
  int32_t intern(uint32_t pos, int32_t parent);
  void add_entry(const PdaEntry& entry, PdaState& out);

  const Grammar* grammar_;
  uint32_t closure_steps_ = 0;  // since the last advance() or initial_state()
  uint64_t work_ = 0;           // since reset_work()
  uint64_t work_budget_ = UINT64_MAX;
  // The entries of the state being built, once it holds more than a linear scan should search.
  std::unordered_set<uint64_t> entry_index_;
  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, int32_t> node_index_;
};

}  // namespace rs::grammar
