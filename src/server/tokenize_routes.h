// /tokenize and /detokenize (vLLM's request and response shapes): the served model's tokenizer and chat template,
// so clients can count tokens or check a rendering without generating.
#pragma once

#include <string_view>
#include <variant>

#include <nlohmann/json.hpp>

#include "server/api_error.h"
#include "server/generation.h"

namespace rs::server {

// {"prompt": text} or {"messages": [...], "add_generation_prompt"?, "tools"?, "chat_template_kwargs"?}
//   -> {"count", "max_model_len", "tokens"}
std::variant<nlohmann::json, ApiError> tokenize_request(const ServingModel& model, std::string_view body);
// {"tokens": [ids]} -> {"prompt": text} (special tokens kept, as vLLM)
std::variant<nlohmann::json, ApiError> detokenize_request(const ServingModel& model, std::string_view body);

}  // namespace rs::server
