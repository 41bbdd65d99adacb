// Shared pieces of the GBNF and regex parsers: a cursor over UTF-8 text that reports errors with line and column.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace rs::grammar {

class TextCursor {
 public:
  TextCursor(std::string_view text, std::string_view what) : text_(text), what_(what) {}

  bool done() const { return pos_ >= text_.size(); }
  char peek(size_t ahead = 0) const { return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0'; }
  bool consume(char c) {
    if (peek() != c || done()) return false;
    ++pos_;
    return true;
  }
  bool consume(std::string_view s) {
    if (text_.substr(pos_, s.size()) != s) return false;
    pos_ += s.size();
    return true;
  }
  size_t pos() const { return pos_; }
  size_t size() const { return text_.size(); }
  void set_pos(size_t pos) { pos_ = pos; }
  // Reads one UTF-8 encoded code point (throws on invalid UTF-8).
  char32_t next_code_point();
  // Reads `digits` hex digits as a code point.
  char32_t hex(int digits);
  // Reads a decimal repetition count ({m,n} of GBNF and regex), at most 100000.
  int32_t repeat_count();
  // Throws rs::Error: "<what> at line L, column C: <message>".
  [[noreturn]] void fail(const std::string& message) const;
  [[noreturn]] void fail_at(size_t pos, const std::string& message) const;

 private:
  std::string_view text_;
  std::string_view what_;
  size_t pos_ = 0;
};

}  // namespace rs::grammar
