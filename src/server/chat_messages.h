// Chat messages as OpenAI clients send them, checked and normalised into what HF chat templates expect, as vLLM and
// SGLang do before rendering. Jinja2 itself fails on the raw wire format (Qwen3's template does
// `'</think>' in message.content`, which fails on null), so the server's chat path always normalises;
// `radixserve chat-template` does not (it renders exactly what it is given).
//
// Per message:
//   - role must be system, developer, user, assistant or tool;
//   - content null or absent: "" for assistant messages (a tool-call turn); a 400 for the other roles, as OpenAI;
//   - content as a list of parts: the text parts joined with "\n" (as vLLM); any other part type is a 400;
//   - tool_calls[].function.arguments given as a string holding a JSON object (the OpenAI wire format): the parsed
//     object, keys in the client's order (templates do `arguments | tojson` or `arguments | items`); a string that
//     is not a JSON object stays a string; null or empty tool_calls are dropped;
//   - everything else (tool_call_id, name, reasoning_content, ...) passes through unchanged.
#pragma once

#include <variant>

#include <nlohmann/json.hpp>

#include "server/api_error.h"

namespace rs::server {

// Separator between the text parts of a list-valued content.
inline constexpr const char* kContentPartSeparator = "\n";

// `messages` must already be a non-empty array; returns the normalised copy or the first problem as a 400 whose
// param names the offending field (messages[i].content, messages[i].tool_calls[j].function.arguments, ...).
std::variant<nlohmann::ordered_json, ApiError> normalize_chat_messages(const nlohmann::ordered_json& messages);

}  // namespace rs::server
