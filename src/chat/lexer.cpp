// Jinja lexer, following jinja2's lexer rules (root/tag states, balancing of brackets before tag ends,
// OptionalLStrip for block and comment starts, block_suffix_re "\n?" when trim_blocks).
#include "chat/lexer.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

#include "chat/utf8.h"

namespace rs::chat {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (c & 0x80); }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

// Newlines normalized to "\n" and one trailing newline dropped (keep_trailing_newline=False).
std::string normalize_source(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out.push_back(source[i]);
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

// Unescapes a string literal body the way jinja2 does (Python's unicode-escape codec).
std::string unescape(std::string_view body) {
  std::string out;
  for (size_t i = 0; i < body.size(); ++i) {
    if (body[i] != '\\' || i + 1 >= body.size()) {
      out.push_back(body[i]);
      continue;
    }
    const char c = body[++i];
    auto hex_escape = [&](size_t digits) {
      unsigned value = 0;
      if (i + digits >= body.size()) return false;
      const auto result = std::from_chars(body.data() + i + 1, body.data() + i + 1 + digits, value, 16);
      if (result.ptr != body.data() + i + 1 + digits) return false;
      append_utf8(out, static_cast<char32_t>(value));
      i += digits;
      return true;
    };
    switch (c) {
      case 'n': out.push_back('\n'); break;
      case 't': out.push_back('\t'); break;
      case 'r': out.push_back('\r'); break;
      case 'a': out.push_back('\a'); break;
      case 'b': out.push_back('\b'); break;
      case 'f': out.push_back('\f'); break;
      case 'v': out.push_back('\v'); break;
      case '\\': out.push_back('\\'); break;
      case '\'': out.push_back('\''); break;
      case '"': out.push_back('"'); break;
      case '\n': break;  // line continuation
      case 'x':
        if (!hex_escape(2)) out += "\\x";
        break;
      case 'u':
        if (!hex_escape(4)) out += "\\u";
        break;
      case 'U':
        if (!hex_escape(8)) out += "\\U";
        break;
      default:
        if (c >= '0' && c <= '7') {
          unsigned value = 0;
          size_t digits = 0;
          while (digits < 3 && i < body.size() && body[i] >= '0' && body[i] <= '7') {
            value = value * 8 + (body[i] - '0');
            ++i;
            ++digits;
          }
          --i;
          append_utf8(out, static_cast<char32_t>(value));
        } else {
          out.push_back('\\');
          out.push_back(c);
        }
    }
  }
  return out;
}

class Lexer {
 public:
  Lexer(std::string_view source, const LexerOptions& options) : src_(normalize_source(source)), options_(options) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i) {
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  std::vector<Token> run() {
    while (pos_ < src_.size()) {
      const size_t tag = find_tag_start(pos_);
      if (tag == std::string::npos) {
        emit_text(src_.substr(pos_), pos_);
        pos_ = src_.size();
        break;
      }
      const char type = src_[tag + 1];
      const char sign = tag + 2 < src_.size() && (src_[tag + 2] == '-' || src_[tag + 2] == '+') ? src_[tag + 2] : 0;
      std::string text = src_.substr(pos_, tag - pos_);
      strip_before_tag(text, sign, type != '{');
      emit_text(std::move(text), pos_);
      pos_ = tag + 2 + (sign ? 1 : 0);
      if (type == '#') {
        lex_comment(tag);
      } else if (type == '%' && lex_raw(tag)) {
        continue;
      } else {
        lex_tag(tag, type == '%');
      }
    }
    tokens_.push_back(Token{TokenKind::kEnd, "", pos_at(src_.size())});
    return std::move(tokens_);
  }

 private:
  SourcePos pos_at(size_t offset) const {
    const auto line = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset) - line_starts_.begin();
    const size_t start = line_starts_[line - 1];
    return SourcePos{static_cast<int>(line),
                     static_cast<int>(utf8_length(std::string_view(src_).substr(start, offset - start))) + 1};
  }

  [[noreturn]] void fail(size_t offset, const std::string& message) const {
    throw TemplateError(pos_at(offset), message);
  }

  size_t find_tag_start(size_t from) const {
    for (size_t i = src_.find('{', from); i != std::string::npos; i = src_.find('{', i + 1)) {
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    }
    return std::string::npos;
  }

  // jinja2 OptionalLStrip: "-" strips all whitespace before the tag; lstrip_blocks strips the spaces that
  // precede a block or comment tag on its own line.
  void strip_before_tag(std::string& text, char sign, bool block_or_comment) const {
    if (sign == '-') {
      size_t end = text.size();
      while (end > 0 && is_space(text[end - 1])) --end;
      text.resize(end);
    } else if (sign != '+' && options_.lstrip_blocks && block_or_comment) {
      const size_t line_pos = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
      if ((line_pos > 0 || line_starting_) && line_pos < text.size() &&
          std::all_of(text.begin() + line_pos, text.end(), is_space)) {
        text.resize(line_pos);
      }
    }
  }

  void emit_text(std::string text, size_t offset) {
    if (!text.empty()) tokens_.push_back(Token{TokenKind::kText, std::move(text), pos_at(offset)});
  }

  // After a tag end: "-" swallows all following whitespace, plain block ends swallow one newline.
  void finish_tag_end(size_t after_end, char sign, bool trim) {
    pos_ = after_end;
    if (sign == '-') {
      while (pos_ < src_.size() && is_space(src_[pos_])) ++pos_;
    } else if (sign != '+' && trim && options_.trim_blocks && pos_ < src_.size() && src_[pos_] == '\n') {
      ++pos_;
    }
    line_starting_ = pos_ > 0 && src_[pos_ - 1] == '\n';
  }

  void lex_comment(size_t tag) {
    const size_t end = src_.find("#}", pos_);
    if (end == std::string::npos) fail(tag, "Missing end of comment tag");
    const char sign = end > pos_ && (src_[end - 1] == '-' || src_[end - 1] == '+') ? src_[end - 1] : 0;
    finish_tag_end(end + 2, sign, true);
  }

  // Matches `\s*word\s*` then an end "%}" (with optional sign) at `from`; returns the offset after "%}".
  size_t match_simple_block(size_t from, std::string_view word, char* end_sign) const {
    size_t i = from;
    while (i < src_.size() && is_space(src_[i])) ++i;
    if (src_.compare(i, word.size(), word) != 0) return std::string::npos;
    i += word.size();
    if (i < src_.size() && is_name_char(src_[i])) return std::string::npos;
    while (i < src_.size() && is_space(src_[i])) ++i;
    *end_sign = 0;
    if (i < src_.size() && (src_[i] == '-' || src_[i] == '+')) *end_sign = src_[i++];
    if (src_.compare(i, 2, "%}") != 0) return std::string::npos;
    return i + 2;
  }

  // {% raw %}...{% endraw %}: the body is text, untouched except for the strip rules at its end tag.
  bool lex_raw(size_t tag) {
    char sign = 0;
    const size_t body_start = match_simple_block(pos_, "raw", &sign);
    if (body_start == std::string::npos) return false;
    size_t body = body_start;
    if (sign == '-') {
      while (body < src_.size() && is_space(src_[body])) ++body;
    }
    for (size_t i = src_.find("{%", body); i != std::string::npos; i = src_.find("{%", i + 1)) {
      const char begin_sign = i + 2 < src_.size() && (src_[i + 2] == '-' || src_[i + 2] == '+') ? src_[i + 2] : 0;
      char end_sign = 0;
      const size_t after = match_simple_block(i + 2 + (begin_sign ? 1 : 0), "endraw", &end_sign);
      if (after == std::string::npos) continue;
      std::string text = src_.substr(body, i - body);
      line_starting_ = false;
      strip_before_tag(text, begin_sign, true);
      emit_text(std::move(text), body);
      finish_tag_end(after, end_sign, true);
      return true;
    }
    fail(tag, "Missing end of raw directive");
  }

  void lex_tag(size_t tag, bool is_block) {
    tokens_.push_back(Token{is_block ? TokenKind::kBlockBegin : TokenKind::kVariableBegin, "", pos_at(tag)});
    std::vector<char> brackets;
    while (true) {
      if (pos_ >= src_.size()) {
        fail(tag, is_block ? "unexpected end of template, expected end of statement block ('%}')"
                           : "unexpected end of template, expected end of print statement ('}}')");
      }
      if (brackets.empty() && lex_tag_end(is_block)) return;
      const char c = src_[pos_];
      if (is_space(c)) {
        ++pos_;
      } else if (is_digit(c)) {
        lex_number();
      } else if (is_name_start(c)) {
        const size_t start = pos_;
        while (pos_ < src_.size() && is_name_char(src_[pos_])) ++pos_;
        tokens_.push_back(Token{TokenKind::kName, src_.substr(start, pos_ - start), pos_at(start)});
      } else if (c == '\'' || c == '"') {
        lex_string();
      } else {
        lex_operator(brackets);
      }
    }
  }

  bool lex_tag_end(bool is_block) {
    const std::string_view close = is_block ? "%}" : "}}";
    char sign = 0;
    size_t at = pos_;
    if (src_[at] == '-' || (is_block && src_[at] == '+')) sign = src_[at++];
    if (src_.compare(at, 2, close) != 0) return false;
    tokens_.push_back(Token{is_block ? TokenKind::kBlockEnd : TokenKind::kVariableEnd, "", pos_at(pos_)});
    finish_tag_end(at + 2, sign, is_block);
    return true;
  }

  void lex_number() {
    const size_t start = pos_;
    auto digits = [&] {
      while (pos_ < src_.size() &&
             (is_digit(src_[pos_]) || (src_[pos_] == '_' && pos_ + 1 < src_.size() && is_digit(src_[pos_ + 1])))) {
        ++pos_;
      }
    };
    digits();
    bool is_float = false;
    if (pos_ + 1 < src_.size() && src_[pos_] == '.' && is_digit(src_[pos_ + 1])) {
      is_float = true;
      ++pos_;
      digits();
    }
    if (pos_ < src_.size() && (src_[pos_] == 'e' || src_[pos_] == 'E')) {
      size_t exp = pos_ + 1;
      if (exp < src_.size() && (src_[exp] == '+' || src_[exp] == '-')) ++exp;
      if (exp < src_.size() && is_digit(src_[exp])) {
        is_float = true;
        pos_ = exp;
        digits();
      }
    }
    std::string text = src_.substr(start, pos_ - start);
    text.erase(std::remove(text.begin(), text.end(), '_'), text.end());
    Token token{is_float ? TokenKind::kFloat : TokenKind::kInteger, text, pos_at(start)};
    if (is_float) {
      std::from_chars(text.data(), text.data() + text.size(), token.number);
    } else if (std::from_chars(text.data(), text.data() + text.size(), token.integer).ec != std::errc()) {
      fail(start, "integer literal out of range");
    }
    tokens_.push_back(std::move(token));
  }

  void lex_string() {
    const size_t start = pos_;
    const char quote = src_[pos_++];
    while (pos_ < src_.size() && src_[pos_] != quote) pos_ += src_[pos_] == '\\' ? 2 : 1;
    if (pos_ >= src_.size()) fail(start, fmt::format("unexpected char '{}'", quote));
    ++pos_;
    tokens_.push_back(
        Token{TokenKind::kString, unescape(std::string_view(src_).substr(start + 1, pos_ - start - 2)), pos_at(start)});
  }

  void lex_operator(std::vector<char>& brackets) {
    static constexpr std::string_view kTwoChar[] = {"//", "**", "==", "!=", ">=", "<="};
    static constexpr std::string_view kOneChar = "+-/*%~[](){}<>=.:|,;";
    const size_t start = pos_;
    std::string op;
    for (std::string_view two : kTwoChar) {
      if (src_.compare(pos_, 2, two) == 0) op = two;
    }
    if (op.empty()) {
      if (kOneChar.find(src_[pos_]) == std::string_view::npos)
        fail(pos_, fmt::format("unexpected char '{}'", src_[pos_]));
      op = src_.substr(pos_, 1);
    }
    pos_ += op.size();
    const char c = op[0];
    if (op.size() == 1 && (c == '(' || c == '[' || c == '{')) {
      brackets.push_back(c == '(' ? ')' : (c == '[' ? ']' : '}'));
    } else if (op.size() == 1 && (c == ')' || c == ']' || c == '}')) {
      if (brackets.empty() || brackets.back() != c) fail(start, fmt::format("unexpected '{}'", c));
      brackets.pop_back();
    }
    tokens_.push_back(Token{TokenKind::kOperator, std::move(op), pos_at(start)});
  }

  std::string src_;
  LexerOptions options_;
  std::vector<size_t> line_starts_;
  std::vector<Token> tokens_;
  size_t pos_ = 0;
  bool line_starting_ = true;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source, const LexerOptions& options) {
  return Lexer(source, options).run();
}

}  // namespace rs::chat
