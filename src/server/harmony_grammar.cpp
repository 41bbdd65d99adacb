#include "server/harmony_grammar.h"

#include <fmt/format.h>

#include "base/error.h"
#include "grammar/json_schema.h"
#include "grammar/vocab.h"

namespace rs::server {
namespace {

using grammar::Expr;
using grammar::special_token_bytes;
using json = nlohmann::ordered_json;

// <|channel|>analysis<|message|>TEXT<|end|><|start|>assistant: reasoning is free (any text, never a special token).
Expr optional_analysis() {
  return Expr::repeat(
      Expr::seq({Expr::bytes(special_token_bytes("<|channel|>") + "analysis" + special_token_bytes("<|message|>")),
                 Expr::repeat(Expr::char_class({}, true), 0, -1),
                 Expr::bytes(special_token_bytes("<|end|>") + special_token_bytes("<|start|>") + "assistant")}),
      0, 1);
}

// The header ends the name at a space or '<' (HarmonyParser), so only names of these characters round-trip; OpenAI
// allows [a-zA-Z0-9_-]{1,64}.
bool header_safe_name(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.') return false;
  return true;
}

}  // namespace

grammar::RuleSet harmony_answer_rules(grammar::RuleSet answer) {
  for (auto& [name, body] : answer.rules)
    if (name == answer.root) name = "harmony-answer";
  for (auto& [name, body] : answer.rules) {
    // References to the old root (recursive grammars) follow it.
    std::vector<Expr*> stack = {&body};
    while (!stack.empty()) {
      Expr* e = stack.back();
      stack.pop_back();
      if (e->kind == Expr::Kind::kRef && e->text == answer.root) e->text = "harmony-answer";
      for (Expr& child : e->children) stack.push_back(&child);
    }
  }
  answer.rules.emplace_back(
      "root", Expr::seq({optional_analysis(),
                         Expr::bytes(special_token_bytes("<|channel|>") + "final" + special_token_bytes("<|message|>")),
                         Expr::ref("harmony-answer")}));
  answer.root = "root";
  return answer;
}

grammar::RuleSet harmony_tool_call_rules(const json& tools) {
  grammar::RuleSet rules;
  std::vector<Expr> calls;
  int index = 0;
  for (const json& tool : tools) {
    const json& function = tool["function"];
    const std::string name = function["name"].get<std::string>();
    RS_CHECK(header_safe_name(name),
             "the tool name '{}' cannot be a harmony recipient: use 1-64 letters, digits, '_', '-' or '.'", name);
    const json parameters = function.contains("parameters") && !function["parameters"].is_null()
                                ? function["parameters"]
                                : json{{"type", "object"}, {"additionalProperties", true}};
    Expr arguments = grammar::add_json_schema(rules, parameters, fmt::format("tool{}-", index++));
    calls.push_back(Expr::seq(
        {Expr::bytes(name + " " + special_token_bytes("<|constrain|>") + "json" + special_token_bytes("<|message|>")),
         std::move(arguments)}));
  }
  rules.add("root", Expr::seq({optional_analysis(),
                               Expr::bytes(special_token_bytes("<|channel|>") + "commentary to=functions."),
                               Expr::alt(std::move(calls)), Expr::bytes(special_token_bytes("<|call|>"))}));
  return rules;
}

}  // namespace rs::server
