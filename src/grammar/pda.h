// Pda: the pushdown automaton that runs a Grammar byte by byte. A state is the set of places the input may be in:
// each a byte-set element to match next plus a return continuation (a hash-consed stack node), so stacks share tails.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
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
  // Alive: some continuation exists or the input is complete.
  bool alive() const { return accepting || !entries.empty(); }
};

class Pda {
 public:
  explicit Pda(const Grammar& grammar) : grammar_(&grammar) {}

  PdaState initial_state();
  // out = the state after `byte` from `from` (out's storage is reused). `from` and `out` must differ.
  void advance(const PdaState& from, uint8_t byte, PdaState& out);
  // A key equal for states with the same entries (stacks compared by content), for caching across matchers.
  void append_key(const PdaState& state, std::string& key) const;
  size_t num_nodes() const { return nodes_.size(); }

 private:
  struct Node {
    uint32_t pos;  // the element to continue with (never kEnd)
    int32_t parent;
  };
  void closure(uint32_t pos, int32_t parent, PdaState& out);
  int32_t intern(uint32_t pos, int32_t parent);

  const Grammar* grammar_;
  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, int32_t> node_index_;
};

}  // namespace rs::grammar
