#include "server/tool_call_parser.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "server/partial_tag.h"

namespace rs::server {
namespace {

using nlohmann::json;

constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";
constexpr std::string_view kPythonTag = "<|python_tag|>";
constexpr std::string_view kToolCalls = "[TOOL_CALLS]";
constexpr std::string_view kArgs = "[ARGS]";

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// {"name": string, <arguments_key>: object or JSON string} -> a call.
std::optional<ToolCall> call_of(const json& call, std::initializer_list<const char*> arguments_keys) {
  if (!call.is_object() || !call.contains("name") || !call["name"].is_string()) return std::nullopt;
  json arguments = json::object();
  for (const char* key : arguments_keys) {
    if (!call.contains(key)) continue;
    arguments = call[key];
    break;
  }
  if (!arguments.is_object() && !arguments.is_string()) return std::nullopt;
  return ToolCall{call["name"].get<std::string>(),
                  arguments.is_string() ? arguments.get<std::string>() : arguments.dump()};
}

// The JSON schema type of parameter `param` of function `name` among OpenAI `tools`, or "".
std::string schema_type(const nlohmann::ordered_json* tools, const std::string& name, const std::string& param) {
  if (!tools || !tools->is_array()) return "";
  for (const auto& tool : *tools) {
    const auto& function = tool.contains("function") ? tool["function"] : tool;
    if (!function.is_object() || function.value("name", std::string()) != name) continue;
    const nlohmann::ordered_json* properties = nullptr;
    if (function.contains("parameters") && function["parameters"].is_object() &&
        function["parameters"].contains("properties"))
      properties = &function["parameters"]["properties"];
    if (!properties || !properties->is_object() || !properties->contains(param)) return "";
    const nlohmann::ordered_json type = (*properties)[param].value("type", nlohmann::ordered_json());
    if (type.is_string()) return type.get<std::string>();
    if (type.is_array())  // ["integer", "null"]: the first non-null type
      for (const auto& t : type)
        if (t.is_string() && t != "null") return t.get<std::string>();
    return "";
  }
  return "";
}

// A qwen3_coder parameter value as JSON: typed by the schema where it says, else JSON if it parses, else a string.
json typed_value(const std::string& value, const std::string& type) {
  if (type == "string") return value;
  const json parsed = json::parse(value, nullptr, /*allow_exceptions=*/false);
  if (type.empty()) return parsed.is_discarded() ? json(value) : parsed;
  if (parsed.is_discarded()) return value;
  const bool fits = (type == "integer" && parsed.is_number_integer()) || (type == "number" && parsed.is_number()) ||
                    (type == "boolean" && parsed.is_boolean()) || (type == "object" && parsed.is_object()) ||
                    (type == "array" && parsed.is_array()) || (type == "null" && parsed.is_null());
  return fits ? parsed : json(value);
}

// <function=NAME>\n<parameter=KEY>\nVALUE\n</parameter>...</function> -> a call.
std::optional<ToolCall> qwen3_coder_call(std::string_view body, const nlohmann::ordered_json* tools) {
  body = trim(body);
  constexpr std::string_view kFunction = "<function=", kEndFunction = "</function>";
  constexpr std::string_view kParameter = "<parameter=", kEndParameter = "</parameter>";
  if (body.substr(0, kFunction.size()) != kFunction) return std::nullopt;
  const size_t name_end = body.find('>');
  const size_t end = body.rfind(kEndFunction);
  if (name_end == std::string_view::npos || end == std::string_view::npos || end < name_end ||
      !trim(body.substr(end + kEndFunction.size())).empty())
    return std::nullopt;
  const std::string name(trim(body.substr(kFunction.size(), name_end - kFunction.size())));
  if (name.empty()) return std::nullopt;
  std::string_view rest = body.substr(name_end + 1, end - name_end - 1);
  json arguments = json::object();
  while (!trim(rest).empty()) {
    rest = trim(rest);
    if (rest.substr(0, kParameter.size()) != kParameter) return std::nullopt;
    const size_t key_end = rest.find('>');
    const size_t value_end = rest.find(kEndParameter);
    if (key_end == std::string_view::npos || value_end == std::string_view::npos || value_end < key_end)
      return std::nullopt;
    const std::string key(trim(rest.substr(kParameter.size(), key_end - kParameter.size())));
    std::string_view value = rest.substr(key_end + 1, value_end - key_end - 1);
    if (!value.empty() && value.front() == '\n') value.remove_prefix(1);  // the template's newlines around a value
    if (!value.empty() && value.back() == '\n') value.remove_suffix(1);
    arguments[key] = typed_value(std::string(value), schema_type(tools, name, key));
    rest.remove_prefix(value_end + kEndParameter.size());
  }
  return ToolCall{name, arguments.dump()};
}

// A whole reply in llama3_json or mistral form -> its calls, or nullopt when any part is not a call.
std::optional<std::vector<ToolCall>> whole_reply_calls(ToolCallFormat format, std::string_view text) {
  text = trim(text);
  std::vector<ToolCall> calls;
  if (format == ToolCallFormat::kLlama3Json) {
    if (text.substr(0, kPythonTag.size()) == kPythonTag) text = trim(text.substr(kPythonTag.size()));
    // One object, or several separated by ';' (Llama 3.1's parallel calls).
    std::vector<std::string_view> parts;
    size_t depth = 0, start = 0;
    bool in_string = false, escaped = false;
    for (size_t i = 0; i < text.size(); ++i) {
      const char c = text[i];
      if (in_string) {
        escaped = !escaped && c == '\\';
        if (c == '"' && !escaped) in_string = false;
        if (c != '\\') escaped = false;
        continue;
      }
      if (c == '"') in_string = true;
      if (c == '{') ++depth;
      if (c == '}' && depth > 0) --depth;
      if (c == ';' && depth == 0) parts.push_back(text.substr(start, i - start)), start = i + 1;
    }
    parts.push_back(text.substr(start));
    for (std::string_view part : parts) {
      const json call = json::parse(trim(part), nullptr, false);
      const auto parsed = call_of(call, {"parameters", "arguments"});
      if (!parsed) return std::nullopt;
      calls.push_back(*parsed);
    }
    return calls;
  }
  // mistral: [TOOL_CALLS] then a JSON array of calls, or name[ARGS]{...} per call (each after its own [TOOL_CALLS]).
  const bool marked = text.substr(0, kToolCalls.size()) == kToolCalls;
  if (marked) text = trim(text.substr(kToolCalls.size()));
  if (!text.empty() && text.front() == '[') {
    const json array = json::parse(text, nullptr, false);
    if (!array.is_array() || array.empty()) return std::nullopt;
    for (const auto& call : array) {
      const auto parsed = call_of(call, {"arguments", "parameters"});
      if (!parsed) return std::nullopt;
      calls.push_back(*parsed);
    }
    return calls;
  }
  if (!marked) return std::nullopt;
  while (!text.empty()) {
    const size_t args = text.find(kArgs);
    if (args == std::string_view::npos) return std::nullopt;
    const std::string name(trim(text.substr(0, args)));
    std::string_view rest = text.substr(args + kArgs.size());
    const size_t next = rest.find(kToolCalls);
    const json arguments = json::parse(trim(rest.substr(0, next)), nullptr, false);
    if (name.empty() || !arguments.is_object()) return std::nullopt;
    calls.push_back({name, arguments.dump()});
    text = next == std::string_view::npos ? std::string_view() : trim(rest.substr(next + kToolCalls.size()));
  }
  return calls;
}

}  // namespace

std::optional<ToolCallFormat> tool_call_format_named(std::string_view name) {
  if (name == "hermes" || name == "qwen3") return ToolCallFormat::kHermes;
  if (name == "qwen3_coder") return ToolCallFormat::kQwen3Coder;
  if (name == "llama3_json") return ToolCallFormat::kLlama3Json;
  if (name == "mistral") return ToolCallFormat::kMistral;
  return std::nullopt;
}

std::optional<ToolCallFormat> tool_call_format_of_template(std::string_view t) {
  if (t.find("<function=") != std::string_view::npos) return ToolCallFormat::kQwen3Coder;
  if (t.find("<tool_call>") != std::string_view::npos) return ToolCallFormat::kHermes;
  if (t.find("[TOOL_CALLS]") != std::string_view::npos) return ToolCallFormat::kMistral;
  if (t.find("<|python_tag|>") != std::string_view::npos || t.find("ipython") != std::string_view::npos)
    return ToolCallFormat::kLlama3Json;
  return std::nullopt;
}

ToolCallParser::ToolCallParser(ToolCallFormat format, const nlohmann::ordered_json* tools)
    : format_(format), tools_(tools) {}

void ToolCallParser::close_call(Output& out) {
  std::optional<ToolCall> call;
  if (format_ == ToolCallFormat::kQwen3Coder) {
    call = qwen3_coder_call(call_, tools_);
  } else {
    call = call_of(json::parse(call_, nullptr, /*allow_exceptions=*/false), {"arguments"});
  }
  if (call)
    out.calls.push_back(std::move(*call));
  else
    out.content.append(kOpen).append(call_).append(kClose);
  call_.clear();
  in_call_ = false;
}

ToolCallParser::Output ToolCallParser::feed_whole_reply(std::string_view piece) {
  Output out;
  if (reply_ == Reply::kContent) {
    out.content.assign(piece);
    return out;
  }
  call_.append(piece);
  if (reply_ == Reply::kCall) return out;
  // Undecided: the reply is a call when it opens with a call's first characters (after leading blanks).
  const std::string_view head = trim(call_);
  if (head.empty()) return out;
  const std::string_view marker = format_ == ToolCallFormat::kLlama3Json ? kPythonTag : kToolCalls;
  const char bracket = format_ == ToolCallFormat::kLlama3Json ? '{' : '[';
  if (head.front() == bracket || head.substr(0, marker.size()) == marker) {
    reply_ = Reply::kCall;
  } else if (marker.substr(0, head.size()) == head) {
    // a prefix of the marker: wait for more
  } else {
    reply_ = Reply::kContent;
    out.content = std::move(call_);
    call_.clear();
  }
  return out;
}

ToolCallParser::Output ToolCallParser::feed(std::string_view piece) {
  if (whole_reply()) return feed_whole_reply(piece);
  Output out;
  std::string text = std::move(pending_);
  text.append(piece);
  pending_.clear();
  std::string_view rest = text;
  while (!rest.empty()) {
    const std::string_view tag = in_call_ ? kClose : kOpen;
    const size_t at = rest.find(tag);
    if (at != std::string_view::npos) {
      (in_call_ ? call_ : out.content).append(rest.substr(0, at));
      rest.remove_prefix(at + tag.size());
      if (in_call_)
        close_call(out);
      else
        in_call_ = true;
      continue;
    }
    const size_t keep = partial_tag_suffix(rest, tag);
    (in_call_ ? call_ : out.content).append(rest.substr(0, rest.size() - keep));
    pending_.assign(rest.substr(rest.size() - keep));
    break;
  }
  return out;
}

ToolCallParser::Output ToolCallParser::finish() {
  Output out;
  if (whole_reply()) {
    if (reply_ != Reply::kContent && !call_.empty()) {
      if (auto calls = whole_reply_calls(format_, call_))
        out.calls = std::move(*calls);
      else
        out.content = std::move(call_);
    }
    call_.clear();
    reply_ = Reply::kUndecided;
    return out;
  }
  if (in_call_) out.content.append(kOpen).append(call_);
  out.content.append(pending_);
  call_.clear(), pending_.clear();
  in_call_ = false;
  return out;
}

}  // namespace rs::server
