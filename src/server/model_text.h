// ModelText: the model's text side for the server: its tokenizer and chat template, both optional. A model folder
// without tokenizer.json (the tiny test fixtures) is served with token-id prompts and token-id output only.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/api_error.h"

namespace rs::tokenizer {
class Tokenizer;
class Detokenizer;
}  // namespace rs::tokenizer
namespace rs::chat {
class ChatTemplate;
}

namespace rs::server {

// Incremental detokenization of one choice (UTF-8 safe); yields nothing for a model without a tokenizer.
class TextStream {
 public:
  TextStream(const tokenizer::Tokenizer* tokenizer, bool skip_special_tokens);
  ~TextStream();
  TextStream(TextStream&&) noexcept;
  // Text that `token` completes (may be empty while a multi-byte character is split across tokens).
  std::string push(int32_t token);
  // Whatever is still held back, at the end of the output.
  std::string flush();

 private:
  std::unique_ptr<tokenizer::Detokenizer> detokenizer_;
};

class ModelText {
 public:
  // Loads model_dir/tokenizer.json and the chat template when present (chat_template_file, when given, replaces the
  // model's); throws rs::Error when they are malformed.
  static ModelText load(const std::filesystem::path& model_dir, const std::filesystem::path& chat_template_file = {});
  ModelText();
  ~ModelText();
  ModelText(ModelText&&) noexcept;
  ModelText& operator=(ModelText&&) noexcept;

  bool has_tokenizer() const { return tokenizer_ != nullptr; }
  const tokenizer::Tokenizer* tokenizer() const { return tokenizer_.get(); }
  bool has_chat_template() const { return chat_template_ != nullptr; }
  // Chats are rendered in gpt-oss's harmony format (answers then arrive in harmony channels).
  bool harmony_chat() const;

  // Prompt ids of a completion prompt (the tokenizer's default special tokens added). Needs a tokenizer.
  std::variant<std::vector<int32_t>, ApiError> encode_prompt(std::string_view text) const;
  // Renders a chat (messages plus extra template variables such as tools) and encodes it. A template that refuses
  // the input (raise_exception) or fails gives a 400. continue_final_message: the prompt ends right after the final
  // message's text (no end-of-turn), so the model continues it (vLLM's and transformers' meaning).
  std::variant<std::vector<int32_t>, ApiError> chat_prompt(const nlohmann::ordered_json& messages,
                                                           bool add_generation_prompt,
                                                           const nlohmann::ordered_json& extra,
                                                           bool continue_final_message = false) const;
  // The id of a token given by its text (e.g. "<think>"), if the tokenizer has it.
  std::optional<int32_t> token_id(std::string_view token) const;
  // One token's text for logprobs, or "token_id:N" without a tokenizer.
  std::string token_text(int32_t token) const;
  // One token's raw bytes (a byte token's text is U+FFFD, its bytes are part of a character); empty without a
  // tokenizer, whose output has no text.
  std::string token_bytes(int32_t token) const;
  // A fresh incremental decoder for one choice.
  TextStream stream(bool skip_special_tokens) const { return TextStream(tokenizer_.get(), skip_special_tokens); }

 private:
  std::unique_ptr<tokenizer::Tokenizer> tokenizer_;
  std::unique_ptr<chat::ChatTemplate> chat_template_;
};

}  // namespace rs::server
