// The harmony (gpt-oss) framing of an output constraint: the messages the model must write around the constrained
// part, as grammar rules over text and special tokens (grammar::special_token_bytes).
#pragma once

#include <nlohmann/json.hpp>

#include "grammar/expr.h"

namespace rs::server {

// An optional free analysis message, then the final channel's message, which follows `answer`. The generation prompt
// already ends with <|start|>assistant. Throws nothing; `answer`'s root is renamed.
grammar::RuleSet harmony_answer_rules(grammar::RuleSet answer);

// An optional free analysis message, then one call to one of `tools` (OpenAI tool objects, names checked by the
// caller): <|channel|>commentary to=functions.NAME <|constrain|>json<|message|>ARGUMENTS<|call|>, the arguments
// following the tool's parameters. <|call|> ends the turn, so a harmony answer holds one call (parallel_tool_calls
// changes nothing). Throws rs::Error for an invalid parameters schema or a tool name the header cannot carry.
grammar::RuleSet harmony_tool_call_rules(const nlohmann::ordered_json& tools);

}  // namespace rs::server
