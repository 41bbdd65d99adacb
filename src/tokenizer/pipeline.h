// Pipeline: the loaded stages of one tokenizer (internal to the tokenizer module).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/decoder.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/post_processor.h"
#include "tokenizer/pre_tokenizer.h"

namespace rs::tokenizer {

struct Pipeline {
  Normalizer normalizer;
  PreTokenizer pre_tokenizer;
  BpeModel model;
  AddedVocabulary added;
  PostProcessor post_processor;
  Decoder decoder;
  nlohmann::json config;  // tokenizer_config.json
  std::optional<std::string> bos_token;
  std::optional<std::string> eos_token;
  int32_t vocab_size = 0;  // one past the largest id

  // The string the decoder sees for `id` (added-token content or vocab string); nullopt when the
  // id is unknown or is a special token being skipped.
  std::optional<std::string_view> decode_string(int32_t id, bool skip_special_tokens) const;
};

}  // namespace rs::tokenizer
