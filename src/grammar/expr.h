// Expr: the grammar AST every front end (GBNF, regex, JSON Schema) builds, and RuleSet: named rules of Exprs.
// lower_rules (grammar.h) turns a RuleSet into the flat byte-level Grammar the matcher runs.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace rs::grammar {

struct Expr {
  enum class Kind : uint8_t { kBytes, kClass, kRef, kSeq, kAlt, kRepeat };
  Kind kind = Kind::kSeq;
  std::string text;                                   // kBytes: literal bytes; kRef: rule name
  std::vector<std::pair<char32_t, char32_t>> ranges;  // kClass: inclusive code point ranges
  bool negated = false;                               // kClass: every code point outside `ranges`
  std::vector<Expr> children;                         // kSeq, kAlt; kRepeat: exactly one
  int32_t min = 0, max = -1;                          // kRepeat: bounds, max -1 = unbounded

  static Expr bytes(std::string literal) { return {.kind = Kind::kBytes, .text = std::move(literal)}; }
  static Expr ref(std::string rule) { return {.kind = Kind::kRef, .text = std::move(rule)}; }
  static Expr char_class(std::vector<std::pair<char32_t, char32_t>> ranges, bool negated = false) {
    return {.kind = Kind::kClass, .ranges = std::move(ranges), .negated = negated};
  }
  static Expr seq(std::vector<Expr> items) { return {.kind = Kind::kSeq, .children = std::move(items)}; }
  static Expr alt(std::vector<Expr> options) { return {.kind = Kind::kAlt, .children = std::move(options)}; }
  static Expr repeat(Expr item, int32_t min, int32_t max) {
    Expr e{.kind = Kind::kRepeat, .min = min, .max = max};
    e.children.push_back(std::move(item));
    return e;
  }
  static Expr empty() { return seq({}); }
};

// Named rules; `root` names the start rule. Rule names are unique.
struct RuleSet {
  std::vector<std::pair<std::string, Expr>> rules;
  std::string root = "root";

  void add(std::string name, Expr body) { rules.emplace_back(std::move(name), std::move(body)); }
  bool has(const std::string& name) const {
    for (const auto& [rule, body] : rules)
      if (rule == name) return true;
    return false;
  }
};

}  // namespace rs::grammar
