#include "server/anthropic_messages.h"

#include <fmt/format.h>

#include "server/ids.h"
#include "server/sse.h"

namespace rs::server {
namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

std::string tool_use_id() { return random_id("toolu_"); }

// Anthropic counts prompt tokens read from the cache apart from input_tokens.
json usage_json(const Usage& usage) {
  return {{"input_tokens", usage.prompt_tokens - usage.cached_tokens},
          {"output_tokens", usage.completion_tokens},
          {"cache_read_input_tokens", usage.cached_tokens},
          {"cache_creation_input_tokens", 0}};
}

json tool_input(const std::string& arguments) {
  json input = json::parse(arguments, nullptr, false);
  return input.is_object() ? input : json::object();
}

// A text block list (system, tool_result content) as one string, or nullopt when a block is not text.
std::optional<std::string> joined_text(const ojson& value) {
  if (value.is_string()) return value.get<std::string>();
  if (!value.is_array()) return std::nullopt;
  std::string text;
  for (const ojson& block : value) {
    if (!block.is_object() || block.value("type", "") != "text" || !block.contains("text") ||
        !block["text"].is_string())
      return std::nullopt;
    if (!text.empty()) text += "\n";
    text += block["text"].get<std::string>();
  }
  return text;
}

// One Anthropic message as the chat messages it stands for (tool results become "tool" messages first).
std::optional<ApiError> translate_message(const ojson& message, size_t index, ojson& out) {
  const std::string where = fmt::format("messages[{}]", index);
  if (!message.is_object()) return invalid_param(where, where + " must be an object.");
  const std::string role = message.value("role", "");
  if (role != "user" && role != "assistant")
    return invalid_param(where + ".role", fmt::format("{}.role must be 'user' or 'assistant'.", where));
  const ojson content = message.value("content", ojson());
  if (content.is_string()) {
    out.push_back({{"role", role}, {"content", content}});
    return std::nullopt;
  }
  if (!content.is_array())
    return invalid_param(where + ".content", where + ".content must be a string or an array of content blocks.");
  std::string text, thinking;
  ojson tool_calls = ojson::array();
  for (size_t b = 0; b < content.size(); ++b) {
    const ojson& block = content[b];
    const std::string at = fmt::format("{}.content[{}]", where, b);
    const std::string type = block.is_object() ? block.value("type", "") : "";
    if (type == "text" && block.contains("text") && block["text"].is_string()) {
      text += block["text"].get<std::string>();
    } else if (type == "thinking" && role == "assistant") {
      thinking += block.value("thinking", "");
    } else if (type == "redacted_thinking" && role == "assistant") {
      continue;
    } else if (type == "tool_use" && role == "assistant") {
      if (!block.contains("name") || !block["name"].is_string())
        return invalid_param(at + ".name", at + ": a tool_use block needs a name.");
      tool_calls.push_back(
          {{"id", block.value("id", tool_use_id())},
           {"type", "function"},
           {"function", {{"name", block["name"]}, {"arguments", block.value("input", ojson::object()).dump()}}}});
    } else if (type == "tool_result" && role == "user") {
      const auto result = joined_text(block.value("content", ojson("")));
      if (!result) return invalid_param(at + ".content", at + ": tool results must be text.");
      out.push_back({{"role", "tool"}, {"tool_call_id", block.value("tool_use_id", "")}, {"content", *result}});
    } else if (type == "image" || type == "document") {
      return invalid_param(at, fmt::format("{}: {} blocks are not supported: this server reads text only.", at, type),
                           "unsupported_content");
    } else {
      return invalid_param(at, fmt::format("{}: unsupported content block '{}' in a {} message.", at, type, role));
    }
  }
  if (role == "assistant") {
    ojson reply = {{"role", "assistant"}, {"content", text.empty() && !tool_calls.empty() ? ojson() : ojson(text)}};
    if (!thinking.empty()) reply["reasoning_content"] = thinking;
    if (!tool_calls.empty()) reply["tool_calls"] = tool_calls;
    out.push_back(reply);
  } else if (!text.empty() || out.empty() || out.back().value("role", "") != "tool") {
    out.push_back({{"role", "user"}, {"content", text}});
  }
  return std::nullopt;
}

std::optional<ApiError> translate_tools(const ojson& request, ojson& chat) {
  if (const auto tools = request.find("tools"); tools != request.end() && !tools->is_null()) {
    if (!tools->is_array()) return wrong_type("tools", "an array", *tools);
    ojson functions = ojson::array();
    for (size_t i = 0; i < tools->size(); ++i) {
      const ojson& tool = (*tools)[i];
      const std::string at = fmt::format("tools[{}]", i);
      if (!tool.is_object() || !tool.contains("name") || !tool["name"].is_string())
        return invalid_param(at, at + " needs a name.");
      if (tool.contains("type") && tool["type"] != "custom" && !tool.contains("input_schema"))
        return invalid_param(at + ".type",
                             fmt::format("{}: server tool '{}' is not supported here; declare client tools with an "
                                         "input_schema.",
                                         at, tool["type"].dump()),
                             "unsupported_tool");
      ojson function = {{"name", tool["name"]}};
      if (tool.contains("description")) function["description"] = tool["description"];
      function["parameters"] = tool.value("input_schema", ojson({{"type", "object"}}));
      functions.push_back({{"type", "function"}, {"function", function}});
    }
    chat["tools"] = functions;
  }
  if (const auto choice = request.find("tool_choice"); choice != request.end() && !choice->is_null()) {
    const std::string type = choice->is_object() ? choice->value("type", "") : "";
    if (type == "auto" || type == "none") {
      chat["tool_choice"] = type;
    } else if (type == "any") {
      chat["tool_choice"] = "required";
    } else if (type == "tool" && choice->contains("name")) {
      chat["tool_choice"] = {{"type", "function"}, {"function", {{"name", (*choice)["name"]}}}};
    } else {
      return invalid_param("tool_choice",
                           "tool_choice must be {\"type\": \"auto\" | \"any\" | \"none\"} or "
                           "{\"type\": \"tool\", \"name\": NAME}.");
    }
  }
  return std::nullopt;
}

const char* stop_reason_of(const std::string& finish_reason, bool tool_use, const std::string& stop_sequence) {
  if (tool_use) return "tool_use";
  if (!stop_sequence.empty()) return "stop_sequence";
  return finish_reason == "length" ? "max_tokens" : "end_turn";
}

json stop_sequence_json(const std::string& stop_sequence) {
  return stop_sequence.empty() ? json() : json(stop_sequence);
}

}  // namespace

namespace {
std::variant<nlohmann::ordered_json, ApiError> translate_request(const std::string& body, bool require_max_tokens);
}  // namespace

std::variant<nlohmann::ordered_json, ApiError> anthropic_to_chat(const std::string& body, bool require_max_tokens) {
  try {
    return translate_request(body, require_max_tokens);
  } catch (const nlohmann::json::exception& e) {  // a field of the wrong type somewhere the translation reads
    return invalid_param("", fmt::format("A field has the wrong type: {}", e.what()), "invalid_type");
  }
}

namespace {
std::variant<nlohmann::ordered_json, ApiError> translate_request(const std::string& body, bool require_max_tokens) {
  const ojson request = ojson::parse(body, nullptr, false);
  if (!request.is_object())
    return api_error(400, "invalid_request_error", "The request body is not a JSON object.", {}, "invalid_json");
  ojson chat = ojson::object();
  if (request.contains("model")) chat["model"] = request["model"];
  const auto max_tokens = request.find("max_tokens");
  if (max_tokens != request.end() || require_max_tokens) {
    if (max_tokens == request.end() || !max_tokens->is_number_integer() || max_tokens->get<int64_t>() < 1)
      return invalid_param("max_tokens", "max_tokens: a positive integer is required.");
    chat["max_tokens"] = *max_tokens;
  }
  ojson messages = ojson::array();
  if (const auto system = request.find("system"); system != request.end() && !system->is_null()) {
    const auto text = joined_text(*system);
    if (!text) return invalid_param("system", "system must be a string or an array of text blocks.");
    messages.push_back({{"role", "system"}, {"content", *text}});
  }
  const auto input = request.find("messages");
  if (input == request.end() || !input->is_array() || input->empty())
    return invalid_param("messages", "messages: a non-empty array is required.");
  for (size_t i = 0; i < input->size(); ++i)
    if (auto error = translate_message((*input)[i], i, messages)) return *error;
  chat["messages"] = messages;
  if (auto error = translate_tools(request, chat)) return *error;
  for (const char* name : {"temperature", "top_p", "top_k", "stream"})
    if (request.contains(name)) chat[name] = request[name];
  if (request.contains("stop_sequences")) chat["stop"] = request["stop_sequences"];
  if (chat.value("stream", false)) chat["stream_options"] = {{"include_usage", true}};
  if (const auto thinking = request.find("thinking"); thinking != request.end() && thinking->is_object())
    chat["chat_template_kwargs"] = {{"enable_thinking", thinking->value("type", "") != "disabled"}};
  return chat;
}
}  // namespace

json anthropic_error_json(const ApiError& error) {
  const char* type = "api_error";
  switch (error.status) {
    case 400: type = "invalid_request_error"; break;
    case 401: type = "authentication_error"; break;
    case 403: type = "permission_error"; break;
    case 404: type = "not_found_error"; break;
    case 413: type = "request_too_large"; break;
    case 429: type = "rate_limit_error"; break;
    case 503:
    case 529: type = "overloaded_error"; break;
    default: type = error.status < 500 ? "invalid_request_error" : "api_error";
  }
  std::string message = error.message;
  if (!error.param.empty() && message.find(error.param) == std::string::npos) message = error.param + ": " + message;
  return {{"type", "error"}, {"error", {{"type", type}, {"message", message}}}};
}

json anthropic_message(const std::string& id, const std::string& model, const ChoiceResult& choice,
                       const Usage& usage) {
  json content = json::array();
  if (!choice.reasoning.empty())
    content.push_back({{"type", "thinking"}, {"thinking", choice.reasoning}, {"signature", ""}});
  if (!choice.text.empty() || choice.tool_calls.empty()) content.push_back({{"type", "text"}, {"text", choice.text}});
  for (const ToolCall& call : choice.tool_calls)
    content.push_back(
        {{"type", "tool_use"}, {"id", tool_use_id()}, {"name", call.name}, {"input", tool_input(call.arguments)}});
  return {{"id", id},
          {"type", "message"},
          {"role", "assistant"},
          {"model", model},
          {"content", content},
          {"stop_reason", stop_reason_of(choice.finish_reason, !choice.tool_calls.empty(), choice.stop_sequence)},
          {"stop_sequence", stop_sequence_json(choice.stop_sequence)},
          {"usage", usage_json(usage)}};
}

std::string AnthropicStream::start(int64_t input_tokens) {
  const json message = {{"id", id_},
                        {"type", "message"},
                        {"role", "assistant"},
                        {"model", model_},
                        {"content", json::array()},
                        {"stop_reason", nullptr},
                        {"stop_sequence", nullptr},
                        {"usage", {{"input_tokens", input_tokens}, {"output_tokens", 0}}}};
  return sse_event("message_start", {{"type", "message_start"}, {"message", message}}) +
         sse_event("ping", {{"type", "ping"}});
}

void AnthropicStream::open(Block type, std::string& out) {
  if (open_ == type) return;
  close(out);
  const json block = type == Block::kThinking ? json{{"type", "thinking"}, {"thinking", ""}, {"signature", ""}}
                                              : json{{"type", "text"}, {"text", ""}};
  out += sse_event("content_block_start",
                   {{"type", "content_block_start"}, {"index", next_index_}, {"content_block", block}});
  open_ = type;
}

void AnthropicStream::close(std::string& out) {
  if (open_ == Block::kNone) return;
  out += sse_event("content_block_stop", {{"type", "content_block_stop"}, {"index", next_index_}});
  open_ = Block::kNone;
  ++next_index_;
}

std::string AnthropicStream::delta(const ChoiceDelta& delta) {
  std::string out;
  if (!delta.reasoning.empty()) {
    open(Block::kThinking, out);
    out += sse_event("content_block_delta", {{"type", "content_block_delta"},
                                             {"index", next_index_},
                                             {"delta", {{"type", "thinking_delta"}, {"thinking", delta.reasoning}}}});
  }
  if (!delta.text.empty()) {
    open(Block::kText, out);
    out += sse_event("content_block_delta", {{"type", "content_block_delta"},
                                             {"index", next_index_},
                                             {"delta", {{"type", "text_delta"}, {"text", delta.text}}}});
  }
  for (const ToolCall& call : delta.tool_calls) {
    close(out);
    const json block = {{"type", "tool_use"}, {"id", tool_use_id()}, {"name", call.name}, {"input", json::object()}};
    out += sse_event("content_block_start",
                     {{"type", "content_block_start"}, {"index", next_index_}, {"content_block", block}});
    out += sse_event("content_block_delta",
                     {{"type", "content_block_delta"},
                      {"index", next_index_},
                      {"delta", {{"type", "input_json_delta"}, {"partial_json", tool_input(call.arguments).dump()}}}});
    out += sse_event("content_block_stop", {{"type", "content_block_stop"}, {"index", next_index_}});
    ++next_index_;
    stop_reason_ = "tool_use";
  }
  if (!delta.finish_reason.empty() && stop_reason_ != "tool_use") {
    stop_reason_ = stop_reason_of(delta.finish_reason, false, delta.stop_sequence);
    stop_sequence_ = delta.stop_sequence;
  }
  return out;
}

std::string AnthropicStream::finish(const Usage& usage) {
  std::string out;
  if (next_index_ == 0 && open_ == Block::kNone) open(Block::kText, out);  // as the whole message: one text block
  close(out);
  out += sse_event("message_delta",
                   {{"type", "message_delta"},
                    {"delta", {{"stop_reason", stop_reason_}, {"stop_sequence", stop_sequence_json(stop_sequence_)}}},
                    {"usage", usage_json(usage)}});
  out += sse_event("message_stop", {{"type", "message_stop"}});
  return out;
}

std::string AnthropicStream::error(const ApiError& error) const {
  return sse_event("error", anthropic_error_json(error));
}

}  // namespace rs::server
