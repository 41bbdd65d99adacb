// Helpers shared by the harmony renderer's files (harmony_renderer.cpp, harmony_tools.cpp); not public.
#pragma once

#include <string>
#include <string_view>

#include "chat/value.h"

namespace rs::chat::harmony {

// object[key] for a dict, else an undefined value (the template's attribute access on a mapping).
const Value& field(const Value& object, std::string_view key);
// A string operand of the template's `+`: strings as is, null/absent as "", anything else faults.
std::string text(const Value& value, std::string_view what);
// transformers' tojson (json.dumps, ensure_ascii=False).
std::string tojson(const Value& value);
// render_typescript_type(param_spec).
std::string typescript_type(const Value& spec);

}  // namespace rs::chat::harmony
