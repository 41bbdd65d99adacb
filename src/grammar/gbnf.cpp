#include "grammar/gbnf.h"

#include <cctype>

#include "base/utf8.h"
#include "grammar/parse_util.h"

namespace rs::grammar {
namespace {

bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.'; }

class GbnfParser {
 public:
  explicit GbnfParser(std::string_view text) : in_(text, "grammar") {}

  RuleSet parse() {
    RuleSet rules;
    skip_space();
    while (!in_.done()) {
      const size_t start = in_.pos();
      const std::string name = read_name();
      skip_space();
      if (!in_.consume("::=")) in_.fail("expected '::=' after rule name '" + name + "'");
      if (rules.has(name)) in_.fail_at(start, "rule '" + name + "' is defined twice");
      rules.add(name, alternation());
      skip_space();
    }
    if (!rules.has("root")) in_.fail("the grammar has no 'root' rule");
    return rules;
  }

 private:
  void skip_space() {
    while (!in_.done()) {
      const char c = in_.peek();
      if (c == '#') {
        while (!in_.done() && in_.peek() != '\n') in_.consume(in_.peek());
      } else if (std::isspace(static_cast<unsigned char>(c))) {
        in_.consume(c);
      } else {
        return;
      }
    }
  }

  std::string read_name() {
    std::string name;
    while (!in_.done() && is_name_char(in_.peek())) {
      name += in_.peek();
      in_.consume(in_.peek());
    }
    if (name.empty()) in_.fail("expected a rule name");
    return name;
  }

  // True when a rule definition `name ::=` starts here (so the current rule has ended).
  bool at_rule_start() {
    const size_t here = in_.pos();
    size_t length = 0;
    while (is_name_char(in_.peek(length))) ++length;
    bool result = false;
    if (length > 0) {
      in_.set_pos(here + length);
      skip_space();
      result = in_.consume("::=");
    }
    in_.set_pos(here);
    return result;
  }

  Expr alternation() {
    std::vector<Expr> options{sequence()};
    while (in_.consume('|')) options.push_back(sequence());
    return options.size() == 1 ? std::move(options[0]) : Expr::alt(std::move(options));
  }

  Expr sequence() {
    std::vector<Expr> items;
    while (true) {
      skip_space();
      if (in_.done() || in_.peek() == '|' || in_.peek() == ')' || at_rule_start()) break;
      items.push_back(postfix(primary()));
    }
    return items.size() == 1 ? std::move(items[0]) : Expr::seq(std::move(items));
  }

  Expr postfix(Expr e) {
    while (true) {
      const size_t start = in_.pos();
      if (in_.consume('*')) {
        e = Expr::repeat(std::move(e), 0, -1);
      } else if (in_.consume('+')) {
        e = Expr::repeat(std::move(e), 1, -1);
      } else if (in_.consume('?')) {
        e = Expr::repeat(std::move(e), 0, 1);
      } else if (in_.consume('{')) {
        skip_space();
        const int32_t min = in_.repeat_count();
        int32_t max = min;
        skip_space();
        if (in_.consume(',')) {
          skip_space();
          max = in_.peek() == '}' ? -1 : in_.repeat_count();
          skip_space();
        }
        if (!in_.consume('}')) in_.fail("expected '}'");
        if (max >= 0 && max < min) in_.fail_at(start, "repetition {m,n} with n < m");
        e = Expr::repeat(std::move(e), min, max);
      } else {
        return e;
      }
    }
  }

  char32_t escaped_char() {
    const size_t start = in_.pos();
    in_.consume('\\');
    const char c = in_.peek();
    if (in_.done()) in_.fail("input ends inside an escape");
    in_.consume(c);
    switch (c) {
      case 'n': return '\n';
      case 't': return '\t';
      case 'r': return '\r';
      case '0': return 0;
      case 'x': return in_.hex(2);
      case 'u': return in_.hex(4);
      case 'U': return in_.hex(8);
      case '\\':
      case '"':
      case '\'':
      case '[':
      case ']':
      case '-':
      case '^':
      case '/': return static_cast<unsigned char>(c);
      default: in_.fail_at(start, std::string("unknown escape \\") + c);
    }
  }

  Expr primary() {
    const size_t start = in_.pos();
    const char c = in_.peek();
    if (c == '"' || c == '\'') {
      in_.consume(c);
      std::string bytes;
      while (!in_.consume(c)) {
        if (in_.done() || in_.peek() == '\n') in_.fail_at(start, "unterminated string literal");
        utf8::append(bytes, in_.peek() == '\\' ? escaped_char() : in_.next_code_point());
      }
      return Expr::bytes(std::move(bytes));
    }
    if (c == '[') {
      in_.consume('[');
      const bool negated = in_.consume('^');
      std::vector<std::pair<char32_t, char32_t>> ranges;
      while (!in_.consume(']')) {
        if (in_.done()) in_.fail_at(start, "unterminated character class");
        const char32_t lo = in_.peek() == '\\' ? escaped_char() : in_.next_code_point();
        char32_t hi = lo;
        if (in_.peek() == '-' && in_.peek(1) != ']') {
          in_.consume('-');
          hi = in_.peek() == '\\' ? escaped_char() : in_.next_code_point();
          if (hi < lo) in_.fail("character range out of order");
        }
        ranges.emplace_back(lo, hi);
      }
      if (ranges.empty() && !negated) in_.fail_at(start, "empty character class");
      return Expr::char_class(std::move(ranges), negated);
    }
    if (c == '.') {
      in_.consume('.');
      return Expr::char_class({}, true);
    }
    if (c == '(') {
      in_.consume('(');
      Expr inner = alternation();
      skip_space();
      if (!in_.consume(')')) in_.fail_at(start, "unclosed '('");
      return inner;
    }
    if (is_name_char(c)) return Expr::ref(read_name());
    in_.fail(std::string("unexpected character '") + c + "'");
  }

  TextCursor in_;
};

}  // namespace

RuleSet parse_gbnf(std::string_view text) { return GbnfParser(text).parse(); }

}  // namespace rs::grammar
