#include "grammar/regex.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "base/utf8.h"
#include "grammar/parse_util.h"

namespace rs::grammar {
namespace {

using Ranges = std::vector<std::pair<char32_t, char32_t>>;

Ranges complement(Ranges ranges) {
  std::sort(ranges.begin(), ranges.end());
  Ranges out;
  char32_t next = 0;
  for (auto [lo, hi] : ranges) {
    if (lo > next) out.emplace_back(next, lo - 1);
    if (hi + 1 > next) next = hi + 1;
  }
  if (next <= 0x10FFFF) out.emplace_back(next, 0x10FFFF);
  return out;
}

const Ranges kDigit = {{'0', '9'}};
const Ranges kWord = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
const Ranges kSpace = {{'\t', '\r'}, {' ', ' '}};

// As RE2 does: nested counted repetitions may expand to at most this many copies of their innermost item. The
// matcher's work grows with that product ((.{0,100}){20} would stall it), a single repetition's only linearly.
constexpr int64_t kMaxNestedRepeat = 1000;

// The largest product of counted bounds ({m,n}: n, or m when unbounded) along any nesting path in `e`.
int64_t repeat_product(const Expr& e) {
  int64_t inner = 1;
  for (const Expr& child : e.children) inner = std::max(inner, repeat_product(child));
  if (e.kind != Expr::Kind::kRepeat) return inner;
  return std::min<int64_t>(inner * std::max(e.max, std::max(e.min, 1)), INT32_MAX);
}

class RegexParser {
 public:
  explicit RegexParser(std::string_view pattern) : in_(pattern, "regex") {}

  Expr parse() {
    in_.consume('^');
    Expr e = alternation();
    if (!in_.done()) in_.fail(in_.peek() == ')' ? "unbalanced ')'" : "unexpected character");
    return e;
  }

 private:
  Expr alternation() {
    std::vector<Expr> options{sequence()};
    while (in_.consume('|')) options.push_back(sequence());
    return options.size() == 1 ? std::move(options[0]) : Expr::alt(std::move(options));
  }

  Expr sequence() {
    std::vector<Expr> items;
    while (!in_.done() && in_.peek() != '|' && in_.peek() != ')') {
      if (in_.peek() == '$' && in_.pos() + 1 == in_.size()) {
        in_.consume('$');
        break;
      }
      Expr a = atom();
      items.push_back(quantified(std::move(a)));
    }
    return items.size() == 1 ? std::move(items[0]) : Expr::seq(std::move(items));
  }

  Expr quantified(Expr a) {
    while (true) {
      const size_t start = in_.pos();
      int32_t min = 0, max = -1;
      if (in_.consume('*')) {
      } else if (in_.consume('+')) {
        min = 1;
      } else if (in_.consume('?')) {
        max = 1;
      } else if (in_.peek() == '{' && std::isdigit(static_cast<unsigned char>(in_.peek(1)))) {
        in_.consume('{');
        min = max = in_.repeat_count();
        if (in_.consume(',')) max = in_.peek() == '}' ? -1 : in_.repeat_count();
        if (!in_.consume('}')) in_.fail("expected '}'");
        if (max >= 0 && max < min) in_.fail_at(start, "repetition {m,n} with n < m");
      } else {
        return a;
      }
      in_.consume('?');  // lazy: the same language
      if (in_.peek() == '+') in_.fail("possessive quantifiers are not supported");
      a = Expr::repeat(std::move(a), min, max);
      if (const int64_t inner = repeat_product(a.children[0]); inner > 1) {
        const int64_t copies = repeat_product(a);
        if (copies > kMaxNestedRepeat)
          in_.fail_at(start, fmt::format("grammar too complex: nested repetitions expand to {} copies (at most {})",
                                         copies, kMaxNestedRepeat));
      }
    }
  }

  Expr atom() {
    const size_t start = in_.pos();
    const char c = in_.peek();
    if (c == '(') {
      in_.consume('(');
      if (in_.consume('?')) {
        if (!in_.consume(':')) in_.fail_at(start, "lookaround and named groups are not supported");
      }
      Expr inner = alternation();
      if (!in_.consume(')')) in_.fail_at(start, "unclosed '('");
      return inner;
    }
    if (c == '[') return char_class();
    if (c == '.') {
      in_.consume('.');
      return Expr::char_class({{'\n', '\n'}}, true);
    }
    if (c == '*' || c == '+' || c == '?') in_.fail("nothing to repeat");
    if (c == '^' || c == '$') in_.fail("anchors inside the pattern are not supported");
    if (c == '\\') {
      Ranges ranges;
      bool negated = false;
      const char32_t cp = escape(ranges, negated);
      if (!ranges.empty()) return Expr::char_class(std::move(ranges), negated);
      return literal(cp);
    }
    return literal(in_.next_code_point());
  }

  static Expr literal(char32_t cp) {
    std::string s;
    utf8::append(s, cp);
    return Expr::bytes(std::move(s));
  }

  // Reads an escape after '\'. A class escape (\d \w \s and negations) fills `ranges`; otherwise returns the code
  // point.
  char32_t escape(Ranges& ranges, bool& negated) {
    const size_t start = in_.pos();
    in_.consume('\\');
    if (in_.done()) in_.fail("pattern ends with '\\'");
    const char c = in_.peek();
    in_.consume(c);
    switch (c) {
      case 'd': ranges = kDigit; return 0;
      case 'w': ranges = kWord; return 0;
      case 's': ranges = kSpace; return 0;
      case 'D': ranges = kDigit, negated = true; return 0;
      case 'W': ranges = kWord, negated = true; return 0;
      case 'S': ranges = kSpace, negated = true; return 0;
      case 'n': return '\n';
      case 't': return '\t';
      case 'r': return '\r';
      case 'f': return '\f';
      case 'v': return '\v';
      case '0': return 0;
      case 'x': return in_.hex(2);
      case 'u':
        if (in_.consume('{')) {
          const size_t digits_start = in_.pos();
          while (!in_.done() && in_.peek() != '}') in_.consume(in_.peek());
          const size_t digits = in_.pos() - digits_start;
          in_.set_pos(digits_start);
          const char32_t cp = in_.hex(static_cast<int>(digits));
          in_.consume('}');
          return cp;
        }
        return in_.hex(4);
      case 'b':
      case 'B': in_.fail_at(start, "word boundaries are not supported");
      default: break;
    }
    if (c >= '1' && c <= '9') in_.fail_at(start, "backreferences are not supported");
    if (std::isalnum(static_cast<unsigned char>(c))) in_.fail_at(start, std::string("unknown escape \\") + c);
    in_.set_pos(in_.pos() - 1);
    return in_.next_code_point();
  }

  Expr char_class() {
    const size_t start = in_.pos();
    in_.consume('[');
    const bool negated = in_.consume('^');
    Ranges ranges;
    bool first = true;
    while (true) {
      if (in_.done()) in_.fail_at(start, "unclosed '['");
      if (in_.peek() == ']' && !first) break;
      first = false;
      char32_t lo;
      if (in_.peek() == '\\') {
        Ranges escaped;
        bool escaped_negated = false;
        lo = escape(escaped, escaped_negated);
        if (!escaped.empty()) {
          if (escaped_negated) escaped = complement(escaped);
          ranges.insert(ranges.end(), escaped.begin(), escaped.end());
          continue;
        }
      } else {
        lo = in_.next_code_point();
      }
      char32_t hi = lo;
      if (in_.peek() == '-' && in_.peek(1) != ']' && in_.peek(1) != '\0') {
        in_.consume('-');
        if (in_.peek() == '\\') {
          Ranges escaped;
          bool escaped_negated = false;
          hi = escape(escaped, escaped_negated);
          if (!escaped.empty()) in_.fail("a class escape cannot end a range");
        } else {
          hi = in_.next_code_point();
        }
        if (hi < lo) in_.fail("range out of order");
      }
      ranges.emplace_back(lo, hi);
    }
    in_.consume(']');
    if (ranges.empty() && !negated) in_.fail_at(start, "empty class");
    return Expr::char_class(std::move(ranges), negated);
  }

  TextCursor in_;
};

}  // namespace

Expr parse_regex(std::string_view pattern) { return RegexParser(pattern).parse(); }

RuleSet regex_rules(std::string_view pattern) {
  RuleSet rules;
  rules.add("root", parse_regex(pattern));
  return rules;
}

}  // namespace rs::grammar
