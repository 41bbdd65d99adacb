// Tokenizer: HF tokenizer.json BPE tokenizers (byte-level: Llama 3, Qwen, gpt-oss; SentencePiece
// style: Llama 2, Mistral, Gemma) — text -> token ids and back. One instance serves all threads.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace rs::tokenizer {

struct Pipeline;

class Tokenizer {
 public:
  // Reads `model_dir`/tokenizer.json and, when present, tokenizer_config.json, as transformers'
  // fast tokenizers do: bos/eos tokens, added_tokens_decoder entries missing from tokenizer.json,
  // and for Llama/CodeLlama/Gemma tokenizer classes the [bos] $A [eos] template built from
  // add_bos_token/add_eos_token. truncation/padding are ignored (transformers turns them off).
  // Throws rs::Error when a file is missing or malformed, and names any tokenizer.json feature
  // we do not implement: we never silently produce different ids than HF tokenizers.
  static Tokenizer load(const std::filesystem::path& model_dir);

  // Same from parsed JSON; `tokenizer_config` may be null or an empty object.
  static Tokenizer from_json(const nlohmann::json& tokenizer_json, const nlohmann::json& tokenizer_config);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // HF `tokenizer(text, add_special_tokens=...)["input_ids"]`: added tokens (special or not) in
  // the text become their ids (split_special_tokens = false), the rest is normalized,
  // pre-tokenized and BPE-encoded; add_special_tokens lets the post-processor add BOS/EOS.
  // `text` must be valid UTF-8 (rs::Error otherwise). O(n log n) in the text length at worst
  // (a 1 MB run of one character takes well under a second). Thread-safe.
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens) const;

  // HF tokenizers `decode`: ids -> token strings -> decoder. Ids outside the vocabulary are
  // dropped (as HF does); special tokens too when skip_special_tokens. Invalid UTF-8 produced by
  // byte tokens becomes U+FFFD. clean_up_tokenization_spaces is never applied, so text round-trips
  // and streaming (Detokenizer) matches it exactly. Thread-safe.
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens) const;

  // One past the largest token id (vocab and added tokens); ids below it may still be unused.
  int32_t vocab_size() const;
  // Added tokens first, then the model vocab (vocab strings are byte-level for byte-level models).
  std::optional<int32_t> token_to_id(std::string_view token) const;
  // The token's vocab string or added-token content; empty for an unknown id.
  std::string_view id_to_token(int32_t id) const;
  // True for added tokens marked special (dropped by skip_special_tokens).
  bool is_special(int32_t id) const;
  // The raw bytes the token stands for, before decode() repairs UTF-8: a byte-level token's bytes (perhaps part of a
  // character), a SentencePiece piece with U+2581 as a space and <0xXX> as its byte, an added token's content. Empty
  // for an unknown id. For logprobs' bytes and offsets, and the grammar's token bytes.
  std::string token_bytes(int32_t id) const;

  // What callers pass as add_special_tokens by default: true, as in HF; the post-processor
  // decides what that adds (Llama 3 checkpoints with TemplateProcessing add <|begin_of_text|>,
  // Qwen and gpt-oss add nothing).
  bool add_special_tokens_default() const { return true; }
  // From tokenizer_config.json (a string or an {"content": ...} object there); nullopt if absent.
  const std::optional<std::string>& bos_token() const;
  const std::optional<std::string>& eos_token() const;
  // The whole tokenizer_config.json (an empty object if the file is absent): chat_template etc.
  const nlohmann::json& tokenizer_config() const;

 private:
  friend class Detokenizer;
  explicit Tokenizer(std::unique_ptr<const Pipeline> pipeline);

  std::unique_ptr<const Pipeline> pipeline_;
};

}  // namespace rs::tokenizer
