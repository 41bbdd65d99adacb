#include "server/chat_messages.h"

#include <fmt/format.h>

#include <optional>
#include <set>
#include <string>

#include "server/openai_request.h"

namespace rs::server {
namespace {

using json = nlohmann::ordered_json;

// Levels above a tool call's arguments object in the request body: body, messages, message, tool_calls, call,
// function. Parsed arguments may nest only as deep as the body itself could have (kMaxJsonDepth), so that
// converting them for the template cannot recurse deeper than a body that was accepted.
constexpr int kLevelsAboveArguments = 6;

// A list of content parts as one string: the text parts joined with kContentPartSeparator.
std::variant<std::string, ApiError> join_text_parts(const json& parts, const std::string& where) {
  std::string text;
  for (size_t i = 0; i < parts.size(); ++i) {
    const json& part = parts[i];
    const std::string part_where = fmt::format("{}[{}]", where, i);
    if (!part.is_object()) return wrong_type(part_where, "a content part object", part);
    auto type = part.find("type");
    if (type == part.end() || !type->is_string())
      return invalid_param(part_where, fmt::format("Missing required parameter: '{}.type'.", part_where),
                           "missing_required_parameter");
    if (*type != "text")
      return invalid_param(part_where,
                           fmt::format("Content parts of type '{}' are not supported: this server takes text only "
                                       "({{\"type\": \"text\", \"text\": ...}}).",
                                       type->get<std::string>()),
                           "invalid_content");
    auto part_text = part.find("text");
    if (part_text == part.end() || !part_text->is_string())
      return invalid_param(part_where + ".text",
                           fmt::format("Invalid '{}.text': a text content part needs a string 'text'.", part_where),
                           "invalid_content");
    if (i > 0) text += kContentPartSeparator;
    text += part_text->get<std::string>();
  }
  return text;
}

// A string holding a JSON object becomes that object (keys in order); anything else stays as it is.
std::optional<ApiError> parse_arguments(json& arguments, const std::string& where) {
  if (!arguments.is_string()) return std::nullopt;
  constexpr int kMaxDepth = kMaxJsonDepth - kLevelsAboveArguments;
  bool too_deep = false;
  json parsed = json::parse(
      arguments.get_ref<const std::string&>(),
      [&too_deep](int depth, json::parse_event_t, json&) {
        if (depth >= kMaxDepth) too_deep = true;
        return !too_deep;
      },
      /*allow_exceptions=*/false);
  if (too_deep)
    return invalid_param(where, fmt::format("The JSON in '{}' is nested more than {} levels deep.", where, kMaxDepth),
                         "invalid_json");
  if (!parsed.is_discarded() && parsed.is_object()) arguments = std::move(parsed);
  return std::nullopt;
}

std::optional<ApiError> normalize_tool_calls(json& message, const std::string& where) {
  auto calls = message.find("tool_calls");
  if (calls == message.end()) return std::nullopt;
  if (calls->is_null() || (calls->is_array() && calls->empty())) {
    message.erase(calls);  // "no calls": templates test `"tool_calls" in message` and then index [0]
    return std::nullopt;
  }
  if (!calls->is_array()) return wrong_type(where + ".tool_calls", "an array", *calls);
  for (size_t j = 0; j < calls->size(); ++j) {
    json& call = (*calls)[j];
    const std::string call_where = fmt::format("{}.tool_calls[{}]", where, j);
    if (!call.is_object()) return wrong_type(call_where, "an object", call);
    auto function = call.find("function");
    if (function == call.end() || function->is_null()) continue;  // the template decides what it needs
    if (!function->is_object()) return wrong_type(call_where + ".function", "an object", *function);
    auto arguments = function->find("arguments");
    if (arguments == function->end()) continue;
    if (auto error = parse_arguments(*arguments, call_where + ".function.arguments")) return error;
  }
  return std::nullopt;
}

}  // namespace

std::variant<nlohmann::ordered_json, ApiError> normalize_chat_messages(const nlohmann::ordered_json& messages) {
  static const std::set<std::string, std::less<>> kRoles = {"system", "developer", "user", "assistant", "tool"};
  json out = json::array();
  for (size_t i = 0; i < messages.size(); ++i) {
    const json& message = messages[i];
    const std::string where = fmt::format("messages[{}]", i);
    if (!message.is_object()) return wrong_type(where, "an object", message);
    auto role = message.find("role");
    if (role == message.end() || !role->is_string() || !kRoles.contains(role->get_ref<const std::string&>()))
      return invalid_param(where + ".role",
                           fmt::format("Invalid value for '{}.role': expected one of system, "
                                       "developer, user, assistant or tool.",
                                       where),
                           "invalid_value");
    const bool is_assistant = *role == "assistant";
    json copy = message;
    auto content = message.find("content");
    if (content == message.end() || content->is_null()) {
      if (!is_assistant)
        return invalid_param(where + ".content", "Missing required parameter: '" + where + ".content'.",
                             "missing_required_parameter");
      copy["content"] = "";
    } else if (content->is_array()) {
      auto text = join_text_parts(*content, where + ".content");
      if (auto* error = std::get_if<ApiError>(&text)) return *error;
      copy["content"] = std::move(std::get<std::string>(text));
    } else if (!content->is_string()) {
      return wrong_type(where + ".content", "a string or an array of content parts", *content);
    }
    if (is_assistant)
      if (auto error = normalize_tool_calls(copy, where)) return *error;
    out.push_back(std::move(copy));
  }
  return out;
}

}  // namespace rs::server
