#include "grammar/parse_util.h"
#include <cctype>

#include "base/error.h"
#include "base/utf8.h"

namespace rs::grammar {

char32_t TextCursor::next_code_point() {
  if (done()) fail("unexpected end of input");
  const size_t length = utf8::sequence_length(text_, pos_);
  if (length == 0) fail("invalid UTF-8");
  const char32_t cp = utf8::decode(text_, pos_, length);
  pos_ += length;
  return cp;
}

char32_t TextCursor::hex(int digits) {
  char32_t value = 0;
  for (int i = 0; i < digits; ++i) {
    const char c = peek();
    int digit = -1;
    if (c >= '0' && c <= '9') digit = c - '0';
    if (c >= 'a' && c <= 'f') digit = c - 'a' + 10;
    if (c >= 'A' && c <= 'F') digit = c - 'A' + 10;
    if (digit < 0 || done()) fail("expected " + std::to_string(digits) + " hex digits");
    value = value * 16 + static_cast<char32_t>(digit);
    ++pos_;
  }
  if (value > 0x10FFFF) fail("code point out of range");
  return value;
}

void TextCursor::fail(const std::string& message) const { fail_at(pos_, message); }

void TextCursor::fail_at(size_t pos, const std::string& message) const {
  size_t line = 1, column = 1;
  for (size_t i = 0; i < pos && i < text_.size(); ++i) {
    if (text_[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  throw Error(fmt::format("{} at line {}, column {}: {}", what_, line, column, message));
}

int32_t TextCursor::repeat_count() {
  if (!std::isdigit(static_cast<unsigned char>(peek()))) fail("expected a number");
  int64_t value = 0;
  while (std::isdigit(static_cast<unsigned char>(peek()))) {
    value = value * 10 + (peek() - '0');
    if (value > 100000) fail("repetition count too large");
    ++pos_;
  }
  return static_cast<int32_t>(value);
}

}  // namespace rs::grammar
