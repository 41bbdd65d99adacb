// Template: parse once, render many times, each render with its own evaluator and scopes.
#include "chat/template.h"

#include "chat/builtins.h"
#include "chat/evaluator.h"
#include "chat/parser.h"

namespace rs::chat {

Template Template::parse(std::string_view source) {
  Template result;
  result.body_ = std::make_shared<const Body>(parse_template(source));
  return result;
}

std::string Template::render(const Dict& variables, const std::tm& now) const {
  auto globals = std::make_shared<Scope>();
  const Dict builtins = make_globals(now);
  for (const auto& [name, value] : builtins.entries()) globals->set(name, value);
  auto context = std::make_shared<Scope>(globals);
  for (const auto& [name, value] : variables.entries()) context->set(name, value);
  Evaluator evaluator;
  std::string out;
  evaluator.exec_body(*body_, context, out);
  return out;
}

}  // namespace rs::chat
