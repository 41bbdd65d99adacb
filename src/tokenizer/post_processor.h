// PostProcessor: the tokenizer.json "post_processor" (TemplateProcessing, ByteLevel, Sequence)
// adding special tokens such as BOS around an encoded sequence.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace rs::tokenizer {

class PostProcessor {
 public:
  // `config` is the "post_processor" value (null = none). Throws rs::Error naming unsupported
  // types (RobertaProcessing, BertProcessing, ...).
  static PostProcessor from_json(const nlohmann::json& config);

  // The template `[bos] $A [eos]` that transformers' LlamaTokenizerFast and GemmaTokenizerFast
  // install in place of the file's post-processor (their update_post_processor()).
  static PostProcessor bos_eos_template(std::optional<int32_t> bos_id, std::optional<int32_t> eos_id);

  // Surrounds `ids` (the single sequence $A) with the template's special tokens when
  // add_special_tokens is true; otherwise leaves them as they are.
  void process(std::vector<int32_t>& ids, bool add_special_tokens) const;

 private:
  // One template item: the sequence itself (is_sequence) or fixed special-token ids.
  struct Item {
    bool is_sequence;
    std::vector<int32_t> ids;
  };

  void append_steps(const nlohmann::json& config);

  std::optional<std::vector<Item>> single_;  // set by TemplateProcessing
};

}  // namespace rs::tokenizer
