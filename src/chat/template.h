// A parsed Jinja template, rendered the way transformers renders chat templates (jinja2
// ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols, HF tojson, raise_exception,
// strftime_now).
#pragma once

#include <ctime>
#include <memory>
#include <string>
#include <string_view>

#include "chat/ast.h"
#include "chat/value.h"

namespace rs::chat {

class Template {
 public:
  // Throws TemplateError (line and column) on a syntax error.
  static Template parse(std::string_view source);

  // Renders with `variables` as the template's context; strftime_now formats `now` (local time).
  // Throws TemplateError on a runtime error and TemplateRaised from raise_exception. Thread-safe: a
  // Template is immutable after parse.
  std::string render(const Dict& variables, const std::tm& now) const;

 private:
  std::shared_ptr<const Body> body_;
};

}  // namespace rs::chat
