#include "grammar/pda.h"

#include <algorithm>

#include "base/error.h"

namespace rs::grammar {

PdaState Pda::initial_state() {
  closure_steps_ = 0;
  entry_index_.clear();
  PdaState state;
  for (uint32_t start : grammar_->alternatives[grammar_->root]) closure(start, -1, state);
  return state;
}

int32_t Pda::intern(uint32_t pos, int32_t parent) {
  const uint64_t key = (uint64_t{pos} << 32) | static_cast<uint32_t>(parent + 1);
  const auto [it, inserted] = node_index_.try_emplace(key, static_cast<int32_t>(nodes_.size()));
  if (inserted) nodes_.push_back({pos, parent});
  return it->second;
}

namespace {

constexpr size_t kLinearSearchEntries = 16;

uint64_t entry_key(const PdaEntry& entry) { return (uint64_t{entry.pos} << 32) | static_cast<uint32_t>(entry.parent); }

}  // namespace

// Ambiguous grammars put thousands of entries in a state; a linear search for duplicates would be quadratic.
void Pda::add_entry(const PdaEntry& entry, PdaState& out) {
  if (out.entries.size() < kLinearSearchEntries) {
    if (std::find(out.entries.begin(), out.entries.end(), entry) == out.entries.end()) out.entries.push_back(entry);
    return;
  }
  if (out.entries.size() == kLinearSearchEntries && entry_index_.empty())
    for (const PdaEntry& held : out.entries) entry_index_.insert(entry_key(held));
  if (entry_index_.insert(entry_key(entry)).second) out.entries.push_back(entry);
}

// Expands "continue at pos, then parent" until every way forward starts with a byte set. Terminates because lowering
// rejects left recursion; an entry reached twice is kept once.
void Pda::closure(uint32_t pos, int32_t parent, PdaState& out) {
  const Grammar& g = *grammar_;
  while (true) {
    if (++closure_steps_ > kMaxClosureSteps) [[unlikely]]
      RS_FAIL("grammar too complex: one byte needs over {} expansions", kMaxClosureSteps);
    if (++work_ > work_budget_) [[unlikely]]
      RS_FAIL(
          "grammar too complex: one token or token mask needs over {} automaton steps (nested repetitions such as "
          "(.{{0,50}}){{10}} can)",
          work_budget_);
    const uint32_t element = g.elements[pos];
    if (element == Grammar::kEnd) {
      if (parent == kBoundary) {
        out.boundary = true;
        return;
      }
      if (parent < 0) {
        out.accepting = true;
        return;
      }
      const Node node = nodes_[parent];
      pos = node.pos;
      parent = node.parent;
      continue;
    }
    if (Grammar::is_bytes(element)) {
      add_entry({pos, parent}, out);
      return;
    }
    // Entering a rule in tail position returns straight to our parent, so repetition does not deepen the stack.
    const int32_t ret = g.elements[pos + 1] == Grammar::kEnd ? parent : intern(pos + 1, parent);
    const auto& starts = g.alternatives[element & ~Grammar::kRuleFlag];
    for (size_t i = 0; i + 1 < starts.size(); ++i) closure(starts[i], ret, out);
    if (starts.empty()) return;
    pos = starts.back();
    parent = ret;
  }
}

void Pda::advance(const PdaState& from, uint8_t byte, PdaState& out) {
  closure_steps_ = 0;
  if (!entry_index_.empty()) entry_index_.clear();
  out.entries.clear();
  out.accepting = false;
  out.boundary = false;
  const Grammar& g = *grammar_;
  for (const PdaEntry& entry : from.entries)
    if (g.byte_sets[g.elements[entry.pos]].has(byte)) closure(entry.pos + 1, entry.parent, out);
}

PdaEntry Pda::localize(const PdaEntry& entry, int depth, std::string& key) {
  const auto put = [&key](uint32_t value) { key.append(reinterpret_cast<const char*>(&value), sizeof(value)); };
  uint32_t kept[16];
  int count = 0;
  int32_t node = entry.parent;
  for (; node >= 0 && count < depth && count < 16; node = nodes_[node].parent) kept[count++] = nodes_[node].pos;
  const bool whole = node < 0;  // the whole stack fits: no boundary, the local entry is exact
  put(entry.pos);
  for (int i = 0; i < count; ++i) put(kept[i]);
  put(whole ? Grammar::kEnd : Grammar::kEnd - 1);
  int32_t parent = whole ? -1 : kBoundary;
  for (int i = count; i-- > 0;) parent = intern(kept[i], parent);
  return {entry.pos, parent};
}

void Pda::append_key(const PdaState& state, std::string& key) const {
  const auto put = [&key](uint32_t value) { key.append(reinterpret_cast<const char*>(&value), sizeof(value)); };
  put(state.accepting ? 1 : 0);
  for (const PdaEntry& entry : state.entries) {
    put(entry.pos);
    for (int32_t node = entry.parent; node >= 0; node = nodes_[node].parent) put(nodes_[node].pos);
    put(Grammar::kEnd);
  }
}

}  // namespace rs::grammar
