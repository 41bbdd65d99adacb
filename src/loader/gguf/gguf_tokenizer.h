// A GGUF file's tokenizer (tokenizer.ggml.*) as the tokenizer.json and tokenizer_config.json of the Hugging Face folder
// it was converted from: the byte-level BPE vocabulary and merges, added tokens from the token types, the
// pre-tokenizer that llama.cpp names in tokenizer.ggml.pre, BOS/EOS, and the chat template.
#pragma once

#include <optional>

#include <nlohmann/json.hpp>

namespace rs::loader::gguf {

struct HfTokenizer {
  nlohmann::json tokenizer;         // tokenizer.json
  nlohmann::json tokenizer_config;  // tokenizer_config.json
};

// nullopt when the file holds no tokenizer; fails naming what is not served (a SentencePiece "llama" vocabulary, an
// unknown pre-tokenizer).
std::optional<HfTokenizer> hf_tokenizer(const nlohmann::json& metadata);

}  // namespace rs::loader::gguf
