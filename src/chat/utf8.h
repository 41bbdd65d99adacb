// UTF-8 helpers for Python-style string semantics: code-point indexing, whitespace, simple case mapping.
#pragma once

#include <string>
#include <string_view>

namespace rs::chat {

// Decodes UTF-8 into code points; an invalid byte becomes U+FFFD.
std::u32string decode_utf8(std::string_view text);
std::string encode_utf8(std::u32string_view code_points);
void append_utf8(std::string& out, char32_t code_point);

// Number of code points (Python len()).
size_t utf8_length(std::string_view text);
bool is_ascii(std::string_view text);

// Python str.isspace() for one code point.
bool is_python_space(char32_t code_point);
// Simple one-to-one case mapping (ASCII, Latin-1, Latin Extended-A, Greek, Cyrillic); other code points
// are unchanged. (Python's one-to-many mappings such as 'ß'.upper() == 'SS' are handled by callers.)
char32_t to_upper(char32_t code_point);
char32_t to_lower(char32_t code_point);
bool is_alpha(char32_t code_point);
bool is_digit(char32_t code_point);

}  // namespace rs::chat
