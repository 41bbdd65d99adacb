// Grammar: the flat byte-level IR the matcher runs. Rules are lists of alternatives; an alternative is a run of
// elements (a byte set to match, or a rule to enter) ended by kEnd. Code point classes are already UTF-8 byte paths.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "grammar/expr.h"

namespace rs::grammar {

// 256-bit set of byte values.
struct ByteSet {
  std::array<uint64_t, 4> words{};
  bool has(uint8_t byte) const { return (words[byte >> 6] >> (byte & 63)) & 1; }
  void add(uint8_t byte) { words[byte >> 6] |= uint64_t{1} << (byte & 63); }
  bool operator==(const ByteSet&) const = default;
};

struct Grammar {
  // elements[i]: kEnd closes an alternative; kRuleFlag | rule enters a rule; otherwise an index into byte_sets.
  static constexpr uint32_t kEnd = 0xFFFFFFFFu;
  static constexpr uint32_t kRuleFlag = 0x80000000u;
  std::vector<uint32_t> elements;
  std::vector<ByteSet> byte_sets;
  std::vector<std::vector<uint32_t>> alternatives;  // [rule] -> start index in elements of each alternative
  std::vector<std::string> rule_names;              // [rule], for errors and debugging
  uint32_t root = 0;

  static bool is_rule(uint32_t element) { return element != kEnd && (element & kRuleFlag) != 0; }
  static bool is_bytes(uint32_t element) { return (element & kRuleFlag) == 0; }
};

// Lowers `rules` to a Grammar: repetitions become helper rules, classes become UTF-8 byte paths. Throws rs::Error
// naming the rule for an undefined reference, left recursion (which a top-down matcher cannot run), an empty class, or
// a repetition bound over 10000.
Grammar lower_rules(const RuleSet& rules);

}  // namespace rs::grammar
