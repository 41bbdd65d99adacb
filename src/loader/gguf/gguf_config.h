// A GGUF model's config.json and generation_config.json, rebuilt from its metadata as the Hugging Face folder it was
// converted from holds them (convert_hf_to_gguf.py's keys read backwards), so the rest of radixserve reads one format.
#pragma once

#include <nlohmann/json.hpp>

#include "loader/gguf/gguf_weights.h"

namespace rs::loader::gguf {

// Fails naming the architecture when radixserve does not serve it from GGUF.
nlohmann::json hf_config(const GgufWeights& weights);
nlohmann::json hf_generation_config(const nlohmann::json& metadata);

}  // namespace rs::loader::gguf
