// POST /v1/embeddings in OpenAI's shape: the request (input as a string, strings, token ids or lists of token ids;
// encoding_format float or base64; dimensions) and the list answer, with Matryoshka truncation.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/openai_request.h"

namespace rs::server {

struct EmbeddingRequest {
  std::string model;
  std::vector<std::string> texts;  // exactly one of these two is non-empty
  std::vector<std::vector<int32_t>> token_inputs;
  bool base64 = false;                // encoding_format "base64": little-endian f32 bytes
  std::optional<int32_t> dimensions;  // Matryoshka: the first N values
};

Parsed<EmbeddingRequest> parse_embedding_request(std::string_view body, const RequestLimits& limits);

// What the served model allows (loader::ModelConfig's embedding fields).
struct EmbeddingModel {
  int32_t width = 0;  // hidden size: the full embedding
  bool normalize = true;
  bool is_matryoshka = false;
  std::vector<int32_t> matryoshka_dimensions;  // empty with is_matryoshka: any size up to width
};

// A 400 when `dimensions` is not one the model allows.
std::optional<ApiError> check_dimensions(const EmbeddingModel& model, std::optional<int32_t> dimensions);
// The first `dimensions` values of an embedding, normalised again when the model normalises (Matryoshka).
std::vector<float> truncate_embedding(const std::vector<float>& embedding, int32_t dimensions, bool normalize);
// {"object":"list","data":[{"object":"embedding","index":i,"embedding":[...] or "base64"}],"model",...,"usage"}.
nlohmann::json embedding_list(const std::string& model, const std::vector<std::vector<float>>& embeddings, bool base64,
                              int64_t prompt_tokens);

}  // namespace rs::server
