// UTF-8 helpers (tokenizer, chat templates, detokenizer): validation, code point access and lossy repair with U+FFFD.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace rs::utf8 {

inline constexpr char32_t kReplacementChar = 0xFFFD;

// Bytes of the well-formed UTF-8 sequence starting at text[pos], or 0 when it is ill-formed or
// truncated. Requires pos < text.size().
std::size_t sequence_length(std::string_view text, std::size_t pos);

// Byte offset of the first ill-formed byte, or std::string_view::npos when text is valid UTF-8.
std::size_t first_invalid(std::string_view text);

// Decodes the sequence of `length` bytes at text[pos]; the caller has validated it.
char32_t decode(std::string_view text, std::size_t pos, std::size_t length);

void append(std::string& out, char32_t code_point);

// Converts arbitrary bytes to valid UTF-8, replacing each maximal ill-formed subpart with one
// U+FFFD (the WHATWG / Rust String::from_utf8_lossy rule that HF tokenizers and Python use).
std::string to_lossy(std::string_view bytes);

// Number of trailing bytes (0..3) that form a truncated but still completable sequence: more bytes
// could turn them into a character, so a streaming decoder must hold them back.
std::size_t incomplete_tail(std::string_view bytes);

}  // namespace rs::utf8
