// Structured output requests: response_format (json_object, json_schema), SGLang's regex/ebnf, vLLM's
// guided_json/guided_regex/guided_grammar/guided_choice and structured_outputs {json, regex, grammar, choice,
// json_object}, and tool_choice "required" or a named function, read from a request body and compiled into the grammar
// the scheduler enforces token by token.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <variant>

#include <nlohmann/json.hpp>

#include "grammar/compiler.h"
#include "server/api_error.h"

namespace rs::server {

struct OutputConstraint {
  enum class Kind : uint8_t { kNone, kJsonObject, kJsonSchema, kRegex, kGrammar, kChoice, kToolCalls };
  Kind kind = Kind::kNone;
  std::string param;  // the request parameter it came from, named in errors ("response_format", "guided_json", ...)
  // kJsonSchema: the schema's JSON text (key order kept); kRegex, kGrammar: the pattern or grammar; kChoice: a JSON
  // array of the strings the output may be.
  std::string text;
  nlohmann::ordered_json tools;  // kToolCalls: the tools a call may use (one for a named tool_choice)
  bool parallel_tool_calls = true;
};

// Reads the constraint fields of a request body (chat: also tool_choice against `tools`). At most one of them may be
// given. An ApiError names the parameter for a misuse (wrong type, unknown tool, two constraints at once).
std::optional<ApiError> read_output_constraint(const nlohmann::ordered_json& body, bool chat, OutputConstraint& out);

// Compiles a constraint (kind != kNone). Qwen3/Hermes tool calls: one or more
// <tool_call>\n{"name": ..., "arguments": ...}\n</tool_call> blocks whose arguments follow the tool's parameters.
// An invalid schema, regex or grammar is a 400 naming the parameter and the problem's position. harmony (gpt-oss):
// the constraint is wrapped in the harmony messages around it (server/harmony_grammar.h): an optional analysis
// message (free text), then the final channel's message, or for tool calls one commentary message to functions.NAME.
std::variant<std::shared_ptr<const grammar::CompiledGrammar>, ApiError> compile_output_constraint(
    const OutputConstraint& constraint, grammar::GrammarCompiler& compiler, bool harmony = false);

}  // namespace rs::server
