// Errors of the Jinja chat-template interpreter: broken templates (TemplateError, with line and column)
// and template-requested failures (TemplateRaised, from raise_exception) that a server maps to HTTP 400.
#pragma once

#include <string>

#include "base/error.h"

namespace rs::chat {

// 1-based position in the template source.
struct SourcePos {
  int line = 0;
  int column = 0;
};

// A syntax error, or a runtime error (undefined value used, type error, unknown filter) while rendering.
// what() = "template:LINE:COL: message".
class TemplateError : public rs::Error {
 public:
  TemplateError(SourcePos pos, const std::string& message);
  SourcePos pos() const { return pos_; }
  // The message without the position prefix.
  const std::string& detail() const { return detail_; }

 private:
  SourcePos pos_;
  std::string detail_;
};

// The template called raise_exception(message): the input (messages, tools) is not acceptable to this
// template. what() is the template's own message, unchanged.
class TemplateRaised : public rs::Error {
 public:
  TemplateRaised(SourcePos pos, const std::string& message) : rs::Error(message), pos_(pos) {}
  SourcePos pos() const { return pos_; }

 private:
  SourcePos pos_;
};

// A runtime failure raised by value operations and builtins, which do not know the source position;
// the evaluator turns it into a TemplateError at the innermost expression node.
struct EvalFault {
  std::string message;
};

[[noreturn]] inline void fault(std::string message) { throw EvalFault{std::move(message)}; }

}  // namespace rs::chat
