// GPT-2 bytes_to_unicode table and its inverse.
#include "tokenizer/byte_level.h"

#include <array>

#include "base/utf8.h"

namespace rs::tokenizer::byte_level {
namespace {

struct Tables {
  std::array<char32_t, 256> byte_to_char{};
  std::array<int16_t, 0x144> char_to_byte{};  // every mapped code point is below U+0144
};

constexpr bool maps_to_itself(int byte) {
  return (byte >= 0x21 && byte <= 0x7E) || (byte >= 0xA1 && byte <= 0xAC) || (byte >= 0xAE && byte <= 0xFF);
}

constexpr Tables build_tables() {
  Tables t;
  t.char_to_byte.fill(-1);
  char32_t next_shifted = 0x100;  // unmapped bytes take U+0100, U+0101, ... in byte order
  for (int byte = 0; byte < 256; ++byte) {
    const char32_t mapped = maps_to_itself(byte) ? static_cast<char32_t>(byte) : next_shifted++;
    t.byte_to_char[byte] = mapped;
    t.char_to_byte[mapped] = static_cast<int16_t>(byte);
  }
  return t;
}

constexpr Tables kTables = build_tables();

const Tables& tables() { return kTables; }

}  // namespace

char32_t byte_to_char(uint8_t byte) { return tables().byte_to_char[byte]; }

std::optional<uint8_t> char_to_byte(char32_t code_point) {
  if (code_point >= tables().char_to_byte.size()) return std::nullopt;
  const int16_t byte = tables().char_to_byte[code_point];
  if (byte < 0) return std::nullopt;
  return static_cast<uint8_t>(byte);
}

std::string encode(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char c : bytes) utf8::append(out, byte_to_char(static_cast<uint8_t>(c)));
  return out;
}

std::optional<std::string> decode(std::string_view token) {
  std::string out;
  out.reserve(token.size());
  std::size_t pos = 0;
  while (pos < token.size()) {
    const std::size_t length = utf8::sequence_length(token, pos);
    if (length == 0) return std::nullopt;
    const auto byte = char_to_byte(utf8::decode(token, pos, length));
    if (!byte) return std::nullopt;
    out.push_back(static_cast<char>(*byte));
    pos += length;
  }
  return out;
}

}  // namespace rs::tokenizer::byte_level
