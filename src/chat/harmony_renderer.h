// Native gpt-oss prompt renderer (harmony format), byte-identical to the HF gpt-oss chat_template for every
// input that template accepts. Used instead of the Jinja interpreter for gpt_oss models.
#pragma once

#include <ctime>
#include <string>

#include "chat/value.h"

namespace rs::chat {

// `variables` holds what the HF template reads: messages, tools, add_generation_prompt, and the optional
// kwargs reasoning_effort (default "medium"), model_identity, builtin_tools ("browser", "python").
// `now` supplies "Current date". Throws TemplateRaised where the HF template calls raise_exception, and
// TemplateError for malformed input (non-string content, empty messages). Where the HF template itself
// fails on inputs a server sees (null content or tool_calls, tools without description or without the
// "function" wrapper) this renderer treats the value as absent instead.
std::string render_harmony(const Dict& variables, const std::tm& now);

// The TypeScript-like namespace the HF template writes for function tools ("## functions ... } // namespace
// functions"), exposed for tests.
std::string render_harmony_tool_namespace(const Value& tools);

}  // namespace rs::chat
