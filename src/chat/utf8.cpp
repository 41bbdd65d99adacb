// UTF-8 decoding and the small Unicode tables that Python string methods need.
#include "chat/utf8.h"

#include "base/utf8.h"

namespace rs::chat {

std::u32string decode_utf8(std::string_view text) {
  std::u32string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const size_t length = utf8::sequence_length(text, i);
    if (length == 0) {  // ill-formed byte: one U+FFFD, as Python's errors="replace" does per byte
      out.push_back(utf8::kReplacementChar);
      ++i;
      continue;
    }
    out.push_back(utf8::decode(text, i, length));
    i += length;
  }
  return out;
}

void append_utf8(std::string& out, char32_t code_point) { utf8::append(out, code_point); }

std::string encode_utf8(std::u32string_view code_points) {
  std::string out;
  out.reserve(code_points.size());
  for (char32_t code_point : code_points) append_utf8(out, code_point);
  return out;
}

size_t utf8_length(std::string_view text) {
  size_t count = 0;
  for (char c : text) count += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return count;
}

bool is_ascii(std::string_view text) {
  for (char c : text) {
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  }
  return true;
}

bool is_python_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

namespace {

// Latin Extended-A (U+0100..U+017F) pairs case by parity: upper is even in 0100-0137 and 014A-0177,
// odd in 0139-0148 and 0179-017E. Returns whether `c` is in a paired range and whether it is the upper one.
bool latin_extended_pair(char32_t c, bool* upper) {
  if ((c >= 0x100 && c <= 0x137 && c != 0x130 && c != 0x131) || (c >= 0x14A && c <= 0x177)) {
    *upper = c % 2 == 0;
    return true;
  }
  if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E)) {
    *upper = c % 2 == 1;
    return true;
  }
  return false;
}

}  // namespace

char32_t to_upper(char32_t c) {
  if (c >= 'a' && c <= 'z') return c - 32;
  if (c < 0x80) return c;
  if (c >= 0xE0 && c <= 0xFE && c != 0xF7) return c - 32;
  if (c == 0xFF) return 0x178;
  bool upper = false;
  if (latin_extended_pair(c, &upper)) return upper ? c : c - 1;
  if (c >= 0x3B1 && c <= 0x3C9 && c != 0x3C2) return c - 32;
  if (c >= 0x430 && c <= 0x44F) return c - 32;
  if (c >= 0x450 && c <= 0x45F) return c - 80;
  return c;
}

char32_t to_lower(char32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  if (c < 0x80) return c;
  if (c >= 0xC0 && c <= 0xDE && c != 0xD7) return c + 32;
  if (c == 0x178) return 0xFF;
  bool upper = false;
  if (latin_extended_pair(c, &upper)) return upper ? c + 1 : c;
  if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 32;
  if (c >= 0x410 && c <= 0x42F) return c + 32;
  if (c >= 0x400 && c <= 0x40F) return c + 80;
  return c;
}

bool is_alpha(char32_t c) { return to_upper(c) != to_lower(c) || (c >= 0x4E00 && c <= 0x9FFF); }

bool is_digit(char32_t c) { return c >= '0' && c <= '9'; }

}  // namespace rs::chat
