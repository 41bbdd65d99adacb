// Jinja lexer: splits template source into text and tag tokens, applying jinja2's whitespace control
// ({%- -%}, trim_blocks, lstrip_blocks, dropping one trailing newline) exactly as transformers configures it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "chat/template_error.h"

namespace rs::chat {

enum class TokenKind {
  kText,           // literal output between tags (raw blocks included)
  kVariableBegin,  // {{
  kVariableEnd,    // }}
  kBlockBegin,     // {%
  kBlockEnd,       // %}
  kName,           // identifiers and keywords (if, for, and, not, ...)
  kString,         // text = the unescaped literal
  kInteger,
  kFloat,
  kOperator,  // + - * / // % ** ~ == != < <= > >= = . : | , ( ) [ ] { }
  kEnd,       // end of the template
};

struct Token {
  TokenKind kind = TokenKind::kEnd;
  std::string text;
  SourcePos pos;
  int64_t integer = 0;
  double number = 0.0;
};

struct LexerOptions {
  bool trim_blocks = true;    // drop the first newline after a block or comment tag
  bool lstrip_blocks = true;  // drop spaces and tabs before a block or comment tag that starts its line
};

// Throws TemplateError (with line and column) on malformed tags.
std::vector<Token> tokenize(std::string_view source, const LexerOptions& options = {});

}  // namespace rs::chat
