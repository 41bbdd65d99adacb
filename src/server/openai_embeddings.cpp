#include "server/openai_embeddings.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/base64.h"
#include "engine/pooling.h"

namespace rs::server {
namespace {

using json = nlohmann::ordered_json;

const std::set<std::string, std::less<>> kEmbeddingFields = {"input", "encoding_format", "dimensions",
                                                             "truncate_prompt_tokens"};

bool is_token_id(const json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>() <= static_cast<uint64_t>(INT32_MAX);
  return v.is_number_integer() && v.get<int64_t>() >= INT32_MIN && v.get<int64_t>() <= INT32_MAX;
}

bool is_token_list(const json& v) { return v.is_array() && !v.empty() && std::all_of(v.begin(), v.end(), is_token_id); }

}  // namespace

Parsed<EmbeddingRequest> parse_embedding_request(std::string_view body, const RequestLimits& limits) {
  auto parsed = parse_body(body, limits.max_json_depth);
  if (auto* error = std::get_if<ApiError>(&parsed)) return *error;
  const json& object = std::get<json>(parsed);
  if (auto error = check_fields(object, kEmbeddingFields, limits.strict_fields)) return *error;
  EmbeddingRequest request;
  if (object.contains("model")) {
    if (!object["model"].is_string()) return wrong_type("model", "a string", object["model"]);
    request.model = object["model"].get<std::string>();
  }
  if (!object.contains("input"))
    return invalid_param("input", "Missing required parameter: 'input'.", "missing_required_parameter");
  const json& input = object["input"];
  if (input.is_string()) {
    request.texts.push_back(input.get<std::string>());
  } else if (is_token_list(input)) {
    request.token_inputs.push_back(input.get<std::vector<int32_t>>());
  } else if (input.is_array() && !input.empty() &&
             std::all_of(input.begin(), input.end(), [](const json& v) { return v.is_string(); })) {
    for (const json& v : input) request.texts.push_back(v.get<std::string>());
  } else if (input.is_array() && !input.empty() && std::all_of(input.begin(), input.end(), is_token_list)) {
    for (const json& v : input) request.token_inputs.push_back(v.get<std::vector<int32_t>>());
  } else {
    return invalid_param("input",
                         "'input' must be a string, an array of strings, an array of token ids, or an array of "
                         "token-id arrays, and not empty",
                         "invalid_type");
  }
  if (object.contains("encoding_format") && !object["encoding_format"].is_null()) {
    const json& format = object["encoding_format"];
    if (!format.is_string() || (format != "float" && format != "base64"))
      return invalid_param("encoding_format", "'encoding_format' must be 'float' or 'base64'.", "invalid_value");
    request.base64 = format == "base64";
  }
  if (object.contains("dimensions") && !object["dimensions"].is_null()) {
    const json& dimensions = object["dimensions"];
    if (!dimensions.is_number_integer() || dimensions.get<int64_t>() < 1 || dimensions.get<int64_t>() > INT32_MAX)
      return invalid_param("dimensions", "'dimensions' must be a positive integer.", "invalid_value");
    request.dimensions = static_cast<int32_t>(dimensions.get<int64_t>());
  }
  return request;
}

std::optional<ApiError> check_dimensions(const EmbeddingModel& model, std::optional<int32_t> dimensions) {
  if (!dimensions || *dimensions == model.width) return std::nullopt;
  if (!model.is_matryoshka)
    return invalid_param("dimensions",
                         fmt::format("This model does not support Matryoshka representations: its embeddings have {} "
                                     "dimensions, and other sizes would be poor (config.json's is_matryoshka or "
                                     "matryoshka_dimensions enables them).",
                                     model.width),
                         "unsupported_parameter");
  const auto& allowed = model.matryoshka_dimensions;
  if (*dimensions > model.width ||
      (!allowed.empty() && std::find(allowed.begin(), allowed.end(), *dimensions) == allowed.end()))
    return invalid_param("dimensions",
                         allowed.empty() ? fmt::format("'dimensions' must be at most {}.", model.width)
                                         : fmt::format("'dimensions' must be one of the model's Matryoshka sizes: {}.",
                                                       fmt::join(allowed, ", ")),
                         "invalid_value");
  return std::nullopt;
}

std::vector<float> truncate_embedding(const std::vector<float>& embedding, int32_t dimensions, bool normalize) {
  std::vector<float> out(embedding.begin(), embedding.begin() + std::min<size_t>(embedding.size(), dimensions));
  if (normalize) engine::l2_normalize(out);
  return out;
}

nlohmann::json embedding_list(const std::string& model, const std::vector<std::vector<float>>& embeddings, bool base64,
                              int64_t prompt_tokens) {
  nlohmann::json data = nlohmann::json::array();
  for (size_t i = 0; i < embeddings.size(); ++i) {
    nlohmann::json item = {{"object", "embedding"}, {"index", i}};
    if (base64) {
      std::vector<uint8_t> bytes(embeddings[i].size() * sizeof(float));  // little-endian f32, as numpy's frombuffer
      std::memcpy(bytes.data(), embeddings[i].data(), bytes.size());
      item["embedding"] = base64_encode(bytes);
    } else {
      item["embedding"] = embeddings[i];
    }
    data.push_back(std::move(item));
  }
  return {{"object", "list"},
          {"data", std::move(data)},
          {"model", model},
          {"usage", {{"prompt_tokens", prompt_tokens}, {"total_tokens", prompt_tokens}}}};
}

}  // namespace rs::server
