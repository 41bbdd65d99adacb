// lower_rules: RuleSet (Expr trees) -> flat byte-level Grammar, with the left-recursion check the matcher relies on.
#include <algorithm>
#include <map>
#include <unordered_map>

#include "base/error.h"
#include "grammar/grammar.h"

namespace rs::grammar {
namespace {

constexpr int32_t kMaxRepeatBound = 10000;
constexpr char32_t kMaxCodePoint = 0x10FFFF;

using Ranges = std::vector<std::pair<char32_t, char32_t>>;
using BytePath = std::vector<std::pair<uint8_t, uint8_t>>;  // one inclusive byte range per UTF-8 byte

// Sorted, merged, surrogates removed; complemented over [0, 0x10FFFF] when negated.
Ranges normalize(Ranges ranges, bool negated) {
  std::sort(ranges.begin(), ranges.end());
  Ranges merged;
  for (auto [lo, hi] : ranges) {
    if (lo > hi) continue;
    if (!merged.empty() && lo <= merged.back().second + 1)
      merged.back().second = std::max(merged.back().second, hi);
    else
      merged.emplace_back(lo, hi);
  }
  if (negated) {
    Ranges complement;
    char32_t next = 0;
    for (auto [lo, hi] : merged) {
      if (lo > next) complement.emplace_back(next, lo - 1);
      next = hi + 1;
    }
    if (next <= kMaxCodePoint) complement.emplace_back(next, kMaxCodePoint);
    merged = std::move(complement);
  }
  Ranges out;
  for (auto [lo, hi] : merged) {
    hi = std::min(hi, kMaxCodePoint);
    if (lo > hi) continue;
    if (lo < 0xD800 && hi >= 0xD800) {
      out.emplace_back(lo, 0xD7FF);
      if (hi > 0xDFFF) out.emplace_back(0xE000, hi);
    } else if (lo >= 0xD800 && lo <= 0xDFFF) {
      if (hi > 0xDFFF) out.emplace_back(0xE000, hi);
    } else {
      out.emplace_back(lo, hi);
    }
  }
  return out;
}

int encoded_length(char32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

std::vector<uint8_t> encode(char32_t cp) {
  const int n = encoded_length(cp);
  if (n == 1) return {static_cast<uint8_t>(cp)};
  std::vector<uint8_t> bytes(n);
  for (int i = n - 1; i > 0; --i, cp >>= 6) bytes[i] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
  static constexpr uint8_t kLead[] = {0, 0, 0xC0, 0xE0, 0xF0};
  bytes[0] = static_cast<uint8_t>(kLead[n] | cp);
  return bytes;
}

// Splits [lo, hi] into ranges whose UTF-8 encodings differ only by a byte range per position (the utf8-ranges
// construction): first at encoding-length boundaries, then until every continuation byte spans its full range.
void utf8_paths(char32_t lo, char32_t hi, std::vector<BytePath>& out) {
  static constexpr char32_t kLengthEnds[] = {0x7F, 0x7FF, 0xFFFF};
  for (char32_t end : kLengthEnds) {
    if (lo <= end && hi > end) {
      utf8_paths(lo, end, out);
      utf8_paths(end + 1, hi, out);
      return;
    }
  }
  const int n = encoded_length(lo);
  for (int i = 1; i < n; ++i) {
    const char32_t mask = (char32_t{1} << (6 * i)) - 1;
    if ((lo & ~mask) == (hi & ~mask)) continue;
    if ((lo & mask) != 0) {
      utf8_paths(lo, lo | mask, out);
      utf8_paths((lo | mask) + 1, hi, out);
      return;
    }
    if ((hi & mask) != mask) {
      utf8_paths(lo, (hi & ~mask) - 1, out);
      utf8_paths(hi & ~mask, hi, out);
      return;
    }
  }
  const auto a = encode(lo), b = encode(hi);
  BytePath path;
  for (int i = 0; i < n; ++i) path.emplace_back(a[i], b[i]);
  out.push_back(std::move(path));
}

class Lowerer {
 public:
  explicit Lowerer(const RuleSet& rules) : rules_(rules) {}

  Grammar run() {
    for (const auto& [name, body] : rules_.rules) {
      RS_CHECK(!ids_.contains(name), "rule '{}' is defined twice", name);
      ids_[name] = new_rule(name);
    }
    const auto root = ids_.find(rules_.root);
    RS_CHECK(root != ids_.end(), "the grammar has no root rule '{}'", rules_.root);
    g_.root = root->second;
    for (const auto& [name, body] : rules_.rules) define(ids_[name], body, name);
    check_left_recursion();
    return std::move(g_);
  }

 private:
  uint32_t new_rule(const std::string& name) {
    g_.rule_names.push_back(name);
    g_.alternatives.emplace_back();
    return static_cast<uint32_t>(g_.rule_names.size() - 1);
  }

  void add_alternative(uint32_t rule, const std::vector<uint32_t>& elements) {
    g_.alternatives[rule].push_back(static_cast<uint32_t>(g_.elements.size()));
    g_.elements.insert(g_.elements.end(), elements.begin(), elements.end());
    g_.elements.push_back(Grammar::kEnd);
  }

  uint32_t byte_set(const ByteSet& set) {
    for (size_t i = 0; i < g_.byte_sets.size(); ++i)
      if (g_.byte_sets[i] == set) return static_cast<uint32_t>(i);
    g_.byte_sets.push_back(set);
    return static_cast<uint32_t>(g_.byte_sets.size() - 1);
  }

  uint32_t byte_range(uint8_t lo, uint8_t hi) {
    ByteSet set;
    for (int b = lo; b <= hi; ++b) set.add(static_cast<uint8_t>(b));
    return byte_set(set);
  }

  void define(uint32_t rule, const Expr& body, const std::string& context) {
    if (body.kind == Expr::Kind::kAlt) {
      for (const Expr& option : body.children) add_alternative(rule, lower(option, context));
    } else {
      add_alternative(rule, lower(body, context));
    }
  }

  std::vector<uint32_t> lower(const Expr& e, const std::string& context) {
    std::vector<uint32_t> out;
    emit(e, out, context);
    return out;
  }

  uint32_t helper(const std::string& context) { return new_rule(context + "_" + std::to_string(++helpers_)); }

  void emit(const Expr& e, std::vector<uint32_t>& out, const std::string& context) {
    switch (e.kind) {
      case Expr::Kind::kBytes:
        for (unsigned char c : e.text) out.push_back(byte_range(c, c));
        return;
      case Expr::Kind::kClass: out.push_back(char_class(e, context)); return;
      case Expr::Kind::kRef: {
        const auto it = ids_.find(e.text);
        RS_CHECK(it != ids_.end(), "rule '{}' refers to undefined rule '{}'", context, e.text);
        out.push_back(Grammar::kRuleFlag | it->second);
        return;
      }
      case Expr::Kind::kSeq:
        for (const Expr& item : e.children) emit(item, out, context);
        return;
      case Expr::Kind::kAlt: {
        if (e.children.size() == 1) return emit(e.children[0], out, context);
        const uint32_t rule = helper(context);
        define(rule, e, context);
        out.push_back(Grammar::kRuleFlag | rule);
        return;
      }
      case Expr::Kind::kRepeat: return emit_repeat(e, out, context);
    }
  }

  void emit_repeat(const Expr& e, std::vector<uint32_t>& out, const std::string& context) {
    RS_CHECK(e.min >= 0 && (e.max < 0 || e.max >= e.min), "rule '{}' has a repetition {{{},{}}} with bad bounds",
             context, e.min, e.max);
    RS_CHECK(e.min <= kMaxRepeatBound && e.max <= kMaxRepeatBound,
             "rule '{}' has a repetition bound over {} ({{{},{}}})", context, kMaxRepeatBound, e.min, e.max);
    std::vector<uint32_t> item = lower(e.children.at(0), context);
    if (item.empty()) return;
    if (item.size() > 1) {
      const uint32_t rule = helper(context);
      add_alternative(rule, item);
      item = {Grammar::kRuleFlag | rule};
    }
    for (int32_t i = 0; i < e.min; ++i) out.push_back(item[0]);
    if (e.max < 0) {  // star: S ::= item S | ""  (the tail call keeps the matcher's stack flat)
      const uint32_t star = helper(context);
      add_alternative(star, {item[0], Grammar::kRuleFlag | star});
      add_alternative(star, {});
      out.push_back(Grammar::kRuleFlag | star);
      return;
    }
    // Up to (max - min) more: T_k ::= item T_{k-1} | "", T_1 ::= item | "".
    uint32_t tail = 0;
    for (int32_t k = 1; k <= e.max - e.min; ++k) {
      const uint32_t rule = helper(context);
      if (k == 1)
        add_alternative(rule, {item[0]});
      else
        add_alternative(rule, {item[0], Grammar::kRuleFlag | tail});
      add_alternative(rule, {});
      tail = rule;
    }
    if (e.max > e.min) out.push_back(Grammar::kRuleFlag | tail);
  }

  uint32_t char_class(const Expr& e, const std::string& context) {
    const Ranges ranges = normalize(e.ranges, e.negated);
    RS_CHECK(!ranges.empty(), "rule '{}' has a character class that matches nothing", context);
    if (ranges.back().second < 0x80) {
      ByteSet set;
      for (auto [lo, hi] : ranges)
        for (char32_t c = lo; c <= hi; ++c) set.add(static_cast<uint8_t>(c));
      return byte_set(set);
    }
    const auto cached = class_rules_.find(ranges);
    if (cached != class_rules_.end()) return Grammar::kRuleFlag | cached->second;
    std::vector<BytePath> paths;
    for (auto [lo, hi] : ranges) utf8_paths(lo, hi, paths);
    // One alternative per path; single-byte paths merge into one ASCII set.
    const uint32_t rule = new_rule(context + "_class");
    ByteSet ascii;
    bool has_ascii = false;
    for (const BytePath& path : paths) {
      if (path.size() == 1) {
        for (int b = path[0].first; b <= path[0].second; ++b) ascii.add(static_cast<uint8_t>(b));
        has_ascii = true;
      }
    }
    if (has_ascii) add_alternative(rule, {byte_set(ascii)});
    for (const BytePath& path : paths) {
      if (path.size() == 1) continue;
      std::vector<uint32_t> elements;
      for (auto [lo, hi] : path) elements.push_back(byte_range(lo, hi));
      add_alternative(rule, elements);
    }
    class_rules_[ranges] = rule;
    return Grammar::kRuleFlag | rule;
  }

  // A rule reachable from itself without consuming a byte would make the top-down matcher loop forever.
  void check_left_recursion() {
    const size_t n = g_.alternatives.size();
    std::vector<bool> nullable(n, false);
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t r = 0; r < n; ++r) {
        if (nullable[r]) continue;
        for (uint32_t start : g_.alternatives[r]) {
          bool all = true;
          for (uint32_t i = start; g_.elements[i] != Grammar::kEnd && all; ++i)
            all = Grammar::is_rule(g_.elements[i]) && nullable[g_.elements[i] & ~Grammar::kRuleFlag];
          if (all) {
            nullable[r] = changed = true;
            break;
          }
        }
      }
    }
    std::vector<std::vector<uint32_t>> first_refs(n);
    for (size_t r = 0; r < n; ++r)
      for (uint32_t start : g_.alternatives[r])
        for (uint32_t i = start; Grammar::is_rule(g_.elements[i]); ++i) {
          const uint32_t target = g_.elements[i] & ~Grammar::kRuleFlag;
          first_refs[r].push_back(target);
          if (!nullable[target]) break;
        }
    std::vector<uint8_t> color(n, 0);  // 0 new, 1 on the DFS path, 2 done
    std::vector<std::pair<uint32_t, size_t>> stack;
    for (uint32_t start = 0; start < n; ++start) {
      if (color[start]) continue;
      stack.emplace_back(start, 0);
      color[start] = 1;
      while (!stack.empty()) {
        auto& [rule, next] = stack.back();
        if (next == first_refs[rule].size()) {
          color[rule] = 2;
          stack.pop_back();
          continue;
        }
        const uint32_t target = first_refs[rule][next++];
        RS_CHECK(color[target] != 1, "rule '{}' is left-recursive (it can reach itself without consuming input)",
                 g_.rule_names[target]);
        if (color[target] == 0) {
          color[target] = 1;
          stack.emplace_back(target, 0);
        }
      }
    }
  }

  const RuleSet& rules_;
  Grammar g_;
  std::unordered_map<std::string, uint32_t> ids_;
  std::map<Ranges, uint32_t> class_rules_;
  int helpers_ = 0;
};

}  // namespace

Grammar lower_rules(const RuleSet& rules) { return Lowerer(rules).run(); }

}  // namespace rs::grammar
