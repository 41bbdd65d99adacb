#include "server/tokenize_routes.h"

#include <fmt/format.h>

#include <set>
#include <string>

#include "server/openai_request.h"

namespace rs::server {
namespace {

using json = nlohmann::json;

std::variant<json, ApiError> parse_object(std::string_view body, const std::set<std::string>& fields) {
  json parsed = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded() || !parsed.is_object())
    return invalid_param({}, "The request body must be a JSON object.", "invalid_json");
  for (const auto& [key, value] : parsed.items())
    if (!fields.contains(key))
      return invalid_param(key, fmt::format("Unrecognized request argument supplied: {}", key), "unknown_parameter");
  return parsed;
}

// As the completions endpoints read it: absent, null or "" means the served model; otherwise a string naming it.
std::optional<ApiError> check_model(const ServingModel& model, const json& body) {
  const auto name = body.find("model");
  if (name == body.end() || name->is_null()) return std::nullopt;
  if (!name->is_string()) return wrong_type("model", "a string", *name);
  const std::string& requested = name->get_ref<const std::string&>();
  if (requested.empty() || model.serves(requested)) return std::nullopt;
  return api_error(404, "invalid_request_error",
                   fmt::format("The model `{}` does not exist or you do not have access to it.", requested), "model",
                   "model_not_found");
}

}  // namespace

std::variant<json, ApiError> tokenize_request(const ServingModel& model, std::string_view body) {
  auto parsed = parse_object(body, {"model", "prompt", "messages", "add_generation_prompt", "continue_final_message",
                                    "add_special_tokens", "tools", "chat_template_kwargs"});
  if (auto* error = std::get_if<ApiError>(&parsed)) return *error;
  const json& request = std::get<json>(parsed);
  if (auto error = check_model(model, request)) return *error;
  if (!model.text.has_tokenizer())
    return invalid_param({}, "This model has no tokenizer (tokenizer.json): it takes token ids only.",
                         "unsupported_parameter");
  if (request.contains("prompt") == request.contains("messages"))
    return invalid_param("prompt", "Give exactly one of 'prompt' (a string) and 'messages'.", "invalid_value");
  std::variant<std::vector<int32_t>, ApiError> ids;
  if (request.contains("prompt")) {
    if (!request["prompt"].is_string()) return wrong_type("prompt", "a string", request["prompt"]);
    if (request.contains("add_special_tokens") && request["add_special_tokens"] != true)
      return invalid_param("add_special_tokens", "only true (the tokenizer's default) is supported",
                           "unsupported_parameter");
    ids = model.text.encode_prompt(request["prompt"].get<std::string>());
  } else {
    // The chat request's own validation and normalisation, so /tokenize counts exactly what generation would.
    json chat = {{"messages", request["messages"]}};
    for (const char* key : {"add_generation_prompt", "continue_final_message", "tools", "chat_template_kwargs"})
      if (request.contains(key)) chat[key] = request[key];
    auto parsed_chat = parse_chat_request(chat.dump(), model.sampling_defaults, model.limits);
    if (auto* error = std::get_if<ApiError>(&parsed_chat)) return *error;
    const ChatRequest& chat_request = std::get<ChatRequest>(parsed_chat);
    if (!model.text.has_chat_template())
      return invalid_param("messages", "This model has no chat template.", "unsupported_parameter");
    ids = model.text.chat_prompt(chat_request.messages, chat_request.add_generation_prompt, chat_request.template_extra,
                                 chat_request.continue_final_message);
  }
  if (auto* error = std::get_if<ApiError>(&ids)) return *error;
  const auto& tokens = std::get<std::vector<int32_t>>(ids);
  return json{{"count", tokens.size()}, {"max_model_len", model.max_context}, {"tokens", tokens}};
}

std::variant<json, ApiError> detokenize_request(const ServingModel& model, std::string_view body) {
  auto parsed = parse_object(body, {"model", "tokens"});
  if (auto* error = std::get_if<ApiError>(&parsed)) return *error;
  const json& request = std::get<json>(parsed);
  if (auto error = check_model(model, request)) return *error;
  if (!model.text.has_tokenizer())
    return invalid_param({}, "This model has no tokenizer (tokenizer.json).", "unsupported_parameter");
  const json* tokens = request.contains("tokens") ? &request["tokens"] : nullptr;
  if (!tokens) return invalid_param("tokens", "Missing required parameter: 'tokens'.", "missing_required_parameter");
  if (!tokens->is_array()) return wrong_type("tokens", "an array of token ids", *tokens);
  TextStream stream = model.text.stream(/*skip_special_tokens=*/false);
  std::string text;
  for (const json& id : *tokens) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= model.vocab_size)
      return invalid_param("tokens",
                           fmt::format("Token ids must be integers in [0, {}); got {}.", model.vocab_size, id.dump()),
                           "invalid_token_id");
    text += stream.push(id.get<int32_t>());
  }
  text += stream.flush();
  return json{{"prompt", text}};
}

}  // namespace rs::server
