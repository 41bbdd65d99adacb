#include "server/openai_responses.h"

#include <fmt/format.h>

#include <chrono>

#include "server/ids.h"
#include "server/sse.h"

namespace rs::server {
namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Text parts (input_text, output_text, text, refusal) joined, or nullopt for another part (an image, a file).
std::optional<std::string> text_of(const ojson& content) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) return std::nullopt;
  std::string text;
  for (const ojson& part : content) {
    const std::string type = part.is_object() ? part.value("type", "") : "";
    if (type == "input_text" || type == "output_text" || type == "text") {
      text += part.value("text", "");
    } else if (type == "refusal") {
      text += part.value("refusal", "");
    } else {
      return std::nullopt;
    }
  }
  return text;
}

std::optional<ApiError> translate_item(const ojson& item, size_t index, ojson& messages) {
  const std::string at = fmt::format("input[{}]", index);
  if (!item.is_object()) return invalid_param(at, at + " must be an object.");
  const std::string type = item.value("type", item.contains("role") ? "message" : "");
  if (type == "message") {
    std::string role = item.value("role", "");
    if (role == "developer") role = "system";
    if (role != "user" && role != "assistant" && role != "system")
      return invalid_param(at + ".role", at + ".role must be user, assistant, system or developer.");
    const auto text = text_of(item.value("content", ojson("")));
    if (!text)
      return invalid_param(at + ".content", at + ": only text content is supported (this server reads text only).",
                           "unsupported_content");
    messages.push_back({{"role", role}, {"content", *text}});
  } else if (type == "function_call") {
    const ojson call = {{"id", item.value("call_id", "")},
                        {"type", "function"},
                        {"function", {{"name", item.value("name", "")}, {"arguments", item.value("arguments", "{}")}}}};
    // Consecutive calls are one assistant turn.
    if (!messages.empty() && messages.back()["role"] == "assistant" && messages.back().contains("tool_calls"))
      messages.back()["tool_calls"].push_back(call);
    else
      messages.push_back({{"role", "assistant"}, {"content", nullptr}, {"tool_calls", ojson::array({call})}});
  } else if (type == "function_call_output") {
    const auto output = text_of(item.value("output", ojson("")));
    if (!output) return invalid_param(at + ".output", at + ": function outputs must be text.");
    messages.push_back({{"role", "tool"}, {"tool_call_id", item.value("call_id", "")}, {"content", *output}});
  } else if (type == "reasoning") {
    // Earlier reasoning: chat templates drop it from the prompt anyway.
  } else {
    return invalid_param(at + ".type", fmt::format("{}: input items of type '{}' are not supported.", at, type),
                         "unsupported_input");
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
      if (!tool.is_object() || tool.value("type", "") != "function")
        return invalid_param(at + ".type", at + ": only function tools are supported here.", "unsupported_tool");
      ojson function = {{"name", tool.value("name", "")}};
      if (tool.contains("description")) function["description"] = tool["description"];
      if (tool.contains("parameters")) function["parameters"] = tool["parameters"];
      functions.push_back({{"type", "function"}, {"function", function}});
    }
    chat["tools"] = functions;
  }
  if (const auto choice = request.find("tool_choice"); choice != request.end() && !choice->is_null()) {
    if (choice->is_string() && (*choice == "auto" || *choice == "none" || *choice == "required")) {
      chat["tool_choice"] = *choice;
    } else if (choice->is_object() && choice->value("type", "") == "function" && choice->contains("name")) {
      chat["tool_choice"] = {{"type", "function"}, {"function", {{"name", (*choice)["name"]}}}};
    } else {
      return invalid_param(
          "tool_choice", "tool_choice must be 'auto', 'none', 'required' or {\"type\": \"function\", \"name\": NAME}.");
    }
  }
  return std::nullopt;
}

std::optional<ApiError> translate_text_format(const ojson& request, ojson& chat) {
  const auto text = request.find("text");
  if (text == request.end() || !text->is_object() || !text->contains("format")) return std::nullopt;
  const ojson& format = (*text)["format"];
  const std::string type = format.is_object() ? format.value("type", "") : "";
  if (type == "text") return std::nullopt;
  if (type == "json_object") {
    chat["response_format"] = {{"type", "json_object"}};
  } else if (type == "json_schema") {
    ojson schema = {{"name", format.value("name", "response")}, {"schema", format.value("schema", ojson::object())}};
    if (format.contains("strict")) schema["strict"] = format["strict"];
    chat["response_format"] = {{"type", "json_schema"}, {"json_schema", schema}};
  } else {
    return invalid_param("text.format", "text.format.type must be text, json_object or json_schema.");
  }
  return std::nullopt;
}

json usage_json(const Usage& usage) {
  return {{"input_tokens", usage.prompt_tokens},
          {"input_tokens_details", {{"cached_tokens", usage.cached_tokens}}},
          {"output_tokens", usage.completion_tokens},
          {"output_tokens_details", {{"reasoning_tokens", 0}}},
          {"total_tokens", usage.prompt_tokens + usage.completion_tokens}};
}

json reasoning_item(const std::string& id, const std::string& text, bool done) {
  json item = {{"type", "reasoning"}, {"id", id}, {"summary", json::array()}};
  if (done) item["content"] = json::array({{{"type", "reasoning_text"}, {"text", text}}});
  return item;
}

json text_part(const std::string& text) {
  return {{"type", "output_text"}, {"text", text}, {"annotations", json::array()}, {"logprobs", json::array()}};
}

json message_item(const std::string& id, const std::string& text, bool done) {
  return {{"type", "message"},
          {"id", id},
          {"status", done ? "completed" : "in_progress"},
          {"role", "assistant"},
          {"content", done ? json::array({text_part(text)}) : json::array()}};
}

json call_item(const ToolCall& call, const std::string& arguments, bool done) {
  return {{"type", "function_call"}, {"id", random_id("fc_")}, {"call_id", random_id("call_")},
          {"name", call.name},       {"arguments", arguments}, {"status", done ? "completed" : "in_progress"}};
}

json response_json(const std::string& id, int64_t created_at, const std::string& model, const char* status,
                   const json& output, const json& echo) {
  json response = {{"id", id},         {"object", "response"},          {"created_at", created_at}, {"status", status},
                   {"error", nullptr}, {"incomplete_details", nullptr}, {"model", model},           {"output", output}};
  response.update(echo);
  return response;
}

void finish_response(json& response, const Usage& usage, const std::string& finish_reason) {
  const bool truncated = finish_reason == "length";
  response["status"] = truncated ? "incomplete" : "completed";
  response["incomplete_details"] = truncated ? json{{"reason", "max_output_tokens"}} : json();
  response["usage"] = usage_json(usage);
}

}  // namespace

void ResponseStore::put(const std::string& id, Entry entry) {
  const size_t size = entry.response.dump().size() + entry.messages.dump().size();
  std::lock_guard lock(mutex_);
  if (size > max_bytes_) return;
  entries_[id] = {std::move(entry), size};
  order_.push_back(id);
  bytes_ += size;
  while (!order_.empty() && (entries_.size() > max_entries_ || bytes_ > max_bytes_)) {
    if (auto it = entries_.find(order_.front()); it != entries_.end()) {
      bytes_ -= it->second.second;
      entries_.erase(it);
    }
    order_.pop_front();
  }
}

std::optional<ResponseStore::Entry> ResponseStore::get(const std::string& id) const {
  std::lock_guard lock(mutex_);
  const auto it = entries_.find(id);
  if (it == entries_.end()) return std::nullopt;
  return it->second.first;
}

bool ResponseStore::erase(const std::string& id) {
  std::lock_guard lock(mutex_);
  const auto it = entries_.find(id);
  if (it == entries_.end()) return false;
  bytes_ -= it->second.second;
  entries_.erase(it);
  // Ids of erased entries stay in order_ until they reach its front: drop them once they are most of it.
  if (order_.size() > 2 * entries_.size() + 64)
    std::erase_if(order_, [this](const std::string& key) { return !entries_.contains(key); });
  return true;
}

namespace {
std::variant<ResponsesCall, ApiError> translate_request(const std::string& body, const ResponseStore& store);
}  // namespace

std::variant<ResponsesCall, ApiError> responses_to_chat(const std::string& body, const ResponseStore& store) {
  try {
    return translate_request(body, store);
  } catch (const nlohmann::json::exception& e) {  // a field of the wrong type somewhere the translation reads
    return invalid_param("", fmt::format("A field has the wrong type: {}", e.what()), "invalid_type");
  }
}

namespace {
std::variant<ResponsesCall, ApiError> translate_request(const std::string& body, const ResponseStore& store) {
  const ojson request = ojson::parse(body, nullptr, false);
  if (!request.is_object())
    return api_error(400, "invalid_request_error", "The request body is not a JSON object.", {}, "invalid_json");
  ResponsesCall call;
  ojson& chat = call.chat;
  if (request.contains("model")) chat["model"] = request["model"];
  if (const auto previous = request.find("previous_response_id"); previous != request.end() && !previous->is_null()) {
    const auto entry = previous->is_string() ? store.get(previous->get<std::string>()) : std::nullopt;
    if (!entry)
      return api_error(404, "invalid_request_error",
                       fmt::format("Previous response with id '{}' not found (responses are kept in memory, the "
                                   "oldest dropped first).",
                                   previous->is_string() ? previous->get<std::string>() : previous->dump()),
                       "previous_response_id", "previous_response_not_found");
    call.messages = entry->messages;
  } else {
    call.messages = ojson::array();
  }
  const auto input = request.find("input");
  if (input == request.end() || (!input->is_string() && !input->is_array()))
    return invalid_param("input", "input: a string or an array of input items is required.");
  if (input->is_string()) {
    call.messages.push_back({{"role", "user"}, {"content", *input}});
  } else {
    for (size_t i = 0; i < input->size(); ++i)
      if (auto error = translate_item((*input)[i], i, call.messages)) return *error;
  }
  ojson messages = ojson::array();
  const auto instructions = request.find("instructions");
  if (instructions != request.end() && instructions->is_string())
    messages.push_back({{"role", "system"}, {"content", *instructions}});
  for (const ojson& message : call.messages) messages.push_back(message);
  chat["messages"] = messages;
  if (auto error = translate_tools(request, chat)) return *error;
  if (auto error = translate_text_format(request, chat)) return *error;
  if (request.contains("max_output_tokens") && !request["max_output_tokens"].is_null())
    chat["max_tokens"] = request["max_output_tokens"];
  // vLLM's extensions of the Responses request pass through to the chat (chat_template_kwargs: enable_thinking).
  for (const char* name : {"temperature", "top_p", "stream", "top_k", "chat_template_kwargs", "seed"})
    if (request.contains(name) && !request[name].is_null()) chat[name] = request[name];
  if (chat.value("stream", false)) chat["stream_options"] = {{"include_usage", true}};
  if (const auto reasoning = request.find("reasoning"); reasoning != request.end() && reasoning->is_object()) {
    const std::string effort = reasoning->value("effort", "");
    if (effort == "low" || effort == "medium" || effort == "high") chat["reasoning_effort"] = effort;
  }
  const auto value_or = [&](const char* name, json fallback) -> json {
    const auto it = request.find(name);
    return it == request.end() || it->is_null() ? fallback : json::parse(it->dump());
  };
  call.store = value_or("store", true).get<bool>();
  call.echo = {{"instructions", value_or("instructions", nullptr)},
               {"max_output_tokens", value_or("max_output_tokens", nullptr)},
               {"temperature", value_or("temperature", 1.0)},
               {"top_p", value_or("top_p", 1.0)},
               {"tools", value_or("tools", json::array())},
               {"tool_choice", value_or("tool_choice", "auto")},
               {"parallel_tool_calls", value_or("parallel_tool_calls", true)},
               {"previous_response_id", value_or("previous_response_id", nullptr)},
               {"store", call.store},
               {"metadata", value_or("metadata", json::object())},
               {"text", value_or("text", json{{"format", {{"type", "text"}}}})},
               {"reasoning", value_or("reasoning", json{{"effort", nullptr}, {"summary", nullptr}})},
               {"truncation", value_or("truncation", "disabled")},
               {"user", value_or("user", nullptr)}};
  return call;
}
}  // namespace

json response_object(const std::string& id, const std::string& model, const ChoiceResult& choice, const Usage& usage,
                     const json& echo) {
  json output = json::array();
  if (!choice.reasoning.empty()) output.push_back(reasoning_item(random_id("rs_"), choice.reasoning, true));
  if (!choice.text.empty() || choice.tool_calls.empty())
    output.push_back(message_item(random_id("msg_"), choice.text, true));
  for (const ToolCall& call : choice.tool_calls) output.push_back(call_item(call, call.arguments, true));
  json response = response_json(id, unix_now(), model, "completed", output, echo);
  finish_response(response, usage, choice.finish_reason);
  return response;
}

ojson conversation_with(const ojson& messages, const json& output) {
  ojson conversation = messages;
  ojson reply = {{"role", "assistant"}, {"content", ""}};
  ojson calls = ojson::array();
  for (const json& item : output) {
    const std::string type = item.value("type", "");
    if (type == "message") {
      for (const json& part : item["content"])
        reply["content"] = reply["content"].get<std::string>() + part.value("text", "");
    } else if (type == "reasoning" && item.contains("content") && !item["content"].empty()) {
      reply["reasoning_content"] = item["content"][0].value("text", "");
    } else if (type == "function_call") {
      calls.push_back({{"id", item["call_id"]},
                       {"type", "function"},
                       {"function", {{"name", item["name"]}, {"arguments", item["arguments"]}}}});
    }
  }
  if (!calls.empty()) {
    reply["tool_calls"] = calls;
    if (reply["content"] == "") reply["content"] = nullptr;
  }
  conversation.push_back(reply);
  return conversation;
}

ResponsesStream::ResponsesStream(std::string id, std::string model, json echo)
    : id_(std::move(id)), model_(std::move(model)), echo_(std::move(echo)), created_at_(unix_now()) {}

std::string ResponsesStream::event(const char* type, json data) {
  data["type"] = type;
  data["sequence_number"] = sequence_++;
  return sse_event(type, data);
}

std::string ResponsesStream::start() {
  const json response = response_json(id_, created_at_, model_, "in_progress", json::array(), echo_);
  std::string out = event("response.created", {{"response", response}});  // numbered in order: two statements
  out += event("response.in_progress", {{"response", response}});
  return out;
}

void ResponsesStream::open(Item item, std::string& out) {
  if (open_ == item) return;
  close(out);
  open_ = item;
  item_text_.clear();
  const int64_t index = static_cast<int64_t>(output_.size());
  if (item == Item::kReasoning) {
    item_id_ = random_id("rs_");
    out +=
        event("response.output_item.added", {{"output_index", index}, {"item", reasoning_item(item_id_, "", false)}});
    out += event("response.content_part.added", {{"item_id", item_id_},
                                                 {"output_index", index},
                                                 {"content_index", 0},
                                                 {"part", {{"type", "reasoning_text"}, {"text", ""}}}});
  } else {
    item_id_ = random_id("msg_");
    out += event("response.output_item.added", {{"output_index", index}, {"item", message_item(item_id_, "", false)}});
    out += event("response.content_part.added",
                 {{"item_id", item_id_}, {"output_index", index}, {"content_index", 0}, {"part", text_part("")}});
  }
}

void ResponsesStream::close(std::string& out) {
  if (open_ == Item::kNone) return;
  const int64_t index = static_cast<int64_t>(output_.size());
  const json where = {{"item_id", item_id_}, {"output_index", index}, {"content_index", 0}};
  json item;
  if (open_ == Item::kReasoning) {
    json done = where;
    done["text"] = item_text_;
    out += event("response.reasoning_text.done", done);
    json part = where;
    part["part"] = {{"type", "reasoning_text"}, {"text", item_text_}};
    out += event("response.content_part.done", part);
    item = reasoning_item(item_id_, item_text_, true);
  } else {
    json done = where;
    done["text"] = item_text_;
    done["logprobs"] = json::array();
    out += event("response.output_text.done", done);
    json part = where;
    part["part"] = text_part(item_text_);
    out += event("response.content_part.done", part);
    item = message_item(item_id_, item_text_, true);
  }
  out += event("response.output_item.done", {{"output_index", index}, {"item", item}});
  output_.push_back(item);
  open_ = Item::kNone;
}

std::string ResponsesStream::delta(const ChoiceDelta& delta) {
  std::string out;
  if (!delta.finish_reason.empty()) finish_reason_ = delta.finish_reason;
  if (!delta.reasoning.empty()) {
    open(Item::kReasoning, out);
    item_text_ += delta.reasoning;
    out += event(
        "response.reasoning_text.delta",
        {{"item_id", item_id_}, {"output_index", output_.size()}, {"content_index", 0}, {"delta", delta.reasoning}});
  }
  if (!delta.text.empty()) {
    open(Item::kMessage, out);
    item_text_ += delta.text;
    out += event("response.output_text.delta", {{"item_id", item_id_},
                                                {"output_index", output_.size()},
                                                {"content_index", 0},
                                                {"delta", delta.text},
                                                {"logprobs", json::array()}});
  }
  for (const ToolCall& call : delta.tool_calls) {
    close(out);
    json item = call_item(call, "", false);
    const int64_t index = static_cast<int64_t>(output_.size());
    const std::string item_id = item["id"];
    out += event("response.output_item.added", {{"output_index", index}, {"item", item}});
    out += event("response.function_call_arguments.delta",
                 {{"item_id", item_id}, {"output_index", index}, {"delta", call.arguments}});
    out += event("response.function_call_arguments.done",
                 {{"item_id", item_id}, {"output_index", index}, {"arguments", call.arguments}, {"name", call.name}});
    item["arguments"] = call.arguments;
    item["status"] = "completed";
    out += event("response.output_item.done", {{"output_index", index}, {"item", item}});
    output_.push_back(item);
  }
  return out;
}

std::string ResponsesStream::finish(const Usage& usage) {
  std::string out;
  if (output_.empty() && open_ == Item::kNone) open(Item::kMessage, out);  // as the whole response: one message
  close(out);
  final_ = response_json(id_, created_at_, model_, "completed", output_, echo_);
  finish_response(final_, usage, finish_reason_);
  out += event(final_["status"] == "completed" ? "response.completed" : "response.incomplete", {{"response", final_}});
  return out;
}

std::string ResponsesStream::error(const ApiError& error) {
  return event("error", {{"code", error.code.empty() ? error.type : error.code},
                         {"message", error.message},
                         {"param", error.param.empty() ? json() : json(error.param)}});
}

}  // namespace rs::server
