// GPT-2 byte-level alphabet: each byte maps to one printable code point (space -> U+0120 'Ġ').
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace rs::tokenizer::byte_level {

// Code point that stands for `byte` in byte-level vocabularies (GPT-2 bytes_to_unicode).
char32_t byte_to_char(uint8_t byte);

// Inverse of byte_to_char; nullopt for code points outside the 256-character alphabet.
std::optional<uint8_t> char_to_byte(char32_t code_point);

// Raw bytes -> byte-level string (UTF-8 of the mapped code points).
std::string encode(std::string_view bytes);

// Byte-level string -> raw bytes; nullopt when `token` is not valid UTF-8 or holds a character
// outside the alphabet (such tokens decode as their own UTF-8, as HF's ByteLevel decoder does).
std::optional<std::string> decode(std::string_view token);

}  // namespace rs::tokenizer::byte_level
