// Unicode character properties and text transforms the tokenizer needs, backed by ICU.
#pragma once

#include <string>
#include <string_view>

namespace rs::tokenizer::unicode {

enum class NormalForm { kNfc, kNfd, kNfkc, kNfkd };

// Normalizes valid UTF-8 text. Thread-safe.
std::string normalize(std::string_view text, NormalForm form);

// Maps each character through its full lowercase mapping on its own (Rust char::to_lowercase, as
// HF's Lowercase normalizer does: no context such as final sigma). Thread-safe.
std::string to_lower(std::string_view text);

// Unicode White_Space: Rust char::is_whitespace and Oniguruma/Rust-regex `\s`.
bool is_whitespace(char32_t code_point);

// Rust regex `\w`: Alphabetic, Mark, Decimal_Number, Connector_Punctuation or Join_Control.
bool is_word_char(char32_t code_point);

// General category N (Nd, Nl, No): Rust char::is_numeric.
bool is_numeric(char32_t code_point);

}  // namespace rs::tokenizer::unicode
