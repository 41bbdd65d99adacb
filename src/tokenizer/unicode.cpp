// ICU-backed Unicode helpers (ICU 72: Unicode 15.0).
#include "tokenizer/unicode.h"

#include <unicode/bytestream.h>
#include <unicode/locid.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include "base/error.h"
#include "base/utf8.h"

namespace rs::tokenizer::unicode {
namespace {

const icu::Normalizer2& normalizer_for(NormalForm form) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* normalizer = nullptr;
  switch (form) {
    case NormalForm::kNfc: normalizer = icu::Normalizer2::getNFCInstance(status); break;
    case NormalForm::kNfd: normalizer = icu::Normalizer2::getNFDInstance(status); break;
    case NormalForm::kNfkc: normalizer = icu::Normalizer2::getNFKCInstance(status); break;
    case NormalForm::kNfkd: normalizer = icu::Normalizer2::getNFKDInstance(status); break;
  }
  RS_CHECK(U_SUCCESS(status) && normalizer != nullptr, "ICU normalizer unavailable: {}", u_errorName(status));
  return *normalizer;
}

bool is_ascii(std::string_view text) {
  for (const char c : text) {
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  }
  return true;
}

}  // namespace

std::string normalize(std::string_view text, NormalForm form) {
  // ASCII is invariant under all four forms; most prompts take this path.
  if (is_ascii(text)) return std::string(text);
  const icu::Normalizer2& normalizer = normalizer_for(form);
  UErrorCode status = U_ZERO_ERROR;
  const icu::StringPiece piece(text.data(), static_cast<int32_t>(text.size()));
  if (normalizer.isNormalizedUTF8(piece, status) && U_SUCCESS(status)) return std::string(text);
  std::string out;
  icu::StringByteSink<std::string> sink(&out, static_cast<int32_t>(text.size()));
  status = U_ZERO_ERROR;
  normalizer.normalizeUTF8(0, piece, sink, nullptr, status);
  RS_CHECK(U_SUCCESS(status), "ICU normalization failed: {}", u_errorName(status));
  return out;
}

std::string to_lower(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  std::size_t pos = 0;
  while (pos < text.size()) {
    const auto byte = static_cast<unsigned char>(text[pos]);
    if (byte < 0x80) {
      out.push_back(static_cast<char>(byte >= 'A' && byte <= 'Z' ? byte + ('a' - 'A') : byte));
      ++pos;
      continue;
    }
    const std::size_t length = utf8::sequence_length(text, pos);
    RS_CHECK(length > 0, "to_lower: invalid UTF-8 at byte {}", pos);
    // One character at a time, so ICU sees no casing context (final sigma stays sigma).
    icu::UnicodeString one =
        icu::UnicodeString::fromUTF8(icu::StringPiece(text.data() + pos, static_cast<int32_t>(length)));
    one.toLower(icu::Locale::getRoot());
    one.toUTF8String(out);
    pos += length;
  }
  return out;
}

bool is_whitespace(char32_t code_point) {
  return u_hasBinaryProperty(static_cast<UChar32>(code_point), UCHAR_WHITE_SPACE) != 0;
}

bool is_word_char(char32_t code_point) {
  const auto c = static_cast<UChar32>(code_point);
  if (u_hasBinaryProperty(c, UCHAR_ALPHABETIC) || u_hasBinaryProperty(c, UCHAR_JOIN_CONTROL)) {
    return true;
  }
  const uint32_t mask = U_GET_GC_MASK(c);
  return (mask & (U_GC_M_MASK | U_GC_ND_MASK | U_GC_PC_MASK)) != 0;
}

bool is_numeric(char32_t code_point) { return (U_GET_GC_MASK(static_cast<UChar32>(code_point)) & U_GC_N_MASK) != 0; }

}  // namespace rs::tokenizer::unicode
