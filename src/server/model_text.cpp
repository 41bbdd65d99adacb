#include "server/model_text.h"

#include <fmt/format.h>

#include "base/log.h"
#include "chat/chat_template.h"
#include "chat/template_error.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/tokenizer.h"

namespace rs::server {

TextStream::TextStream(const tokenizer::Tokenizer* tokenizer, bool skip_special_tokens) {
  if (tokenizer) detokenizer_ = std::make_unique<tokenizer::Detokenizer>(*tokenizer, skip_special_tokens);
}
TextStream::~TextStream() = default;
TextStream::TextStream(TextStream&&) noexcept = default;

std::string TextStream::push(int32_t token) { return detokenizer_ ? detokenizer_->push(token) : std::string(); }
std::string TextStream::flush() { return detokenizer_ ? detokenizer_->flush() : std::string(); }

ModelText::ModelText() = default;
ModelText::~ModelText() = default;
ModelText::ModelText(ModelText&&) noexcept = default;
ModelText& ModelText::operator=(ModelText&&) noexcept = default;

ModelText ModelText::load(const std::filesystem::path& model_dir, const std::filesystem::path& chat_template_file) {
  ModelText text;
  if (!std::filesystem::exists(model_dir / "tokenizer.json")) {
    RS_LOG_WARN("{} has no tokenizer.json: serving token-id prompts only, with empty output text", model_dir.string());
    return text;
  }
  text.tokenizer_ = std::make_unique<tokenizer::Tokenizer>(tokenizer::Tokenizer::load(model_dir));
  try {
    text.chat_template_ = std::make_unique<chat::ChatTemplate>(
        chat::ChatTemplate::load(model_dir, chat::ChatFormat::kAuto, chat_template_file));
  } catch (const chat::TemplateError&) {
    throw;  // a broken template is a startup error, not a missing feature
  } catch (const rs::Error& e) {
    if (!chat_template_file.empty()) throw;  // asked for explicitly: not finding it is an error
    RS_LOG_WARN("no chat template ({}): /v1/chat/completions is unavailable", e.what());
  }
  return text;
}

std::variant<std::vector<int32_t>, ApiError> ModelText::encode_prompt(std::string_view text) const {
  if (!tokenizer_)
    return invalid_param("prompt", "This model has no tokenizer; send the prompt as an array of token ids.",
                         "tokenizer_unavailable");
  try {
    return tokenizer_->encode(text, tokenizer_->add_special_tokens_default());
  } catch (const rs::Error& e) {
    return invalid_param("prompt", fmt::format("The prompt cannot be tokenized: {}", e.what()), "invalid_prompt");
  }
}

std::variant<std::vector<int32_t>, ApiError> ModelText::chat_prompt(const nlohmann::ordered_json& messages,
                                                                    bool add_generation_prompt,
                                                                    const nlohmann::ordered_json& extra,
                                                                    bool continue_final_message) const {
  std::string prompt;
  try {
    prompt = chat_template_->render(messages, add_generation_prompt, extra);
  } catch (const chat::TemplateRaised& e) {
    return invalid_param("messages", e.what(), "chat_template_error");
  } catch (const rs::Error& e) {
    return invalid_param("messages", fmt::format("The chat template failed on these messages: {}", e.what()),
                         "chat_template_error");
  }
  if (continue_final_message) {
    // Cut what the template wrote after the final message's text (its end-of-turn), as transformers does.
    const auto& last = messages.back();
    const std::string text =
        last.contains("content") && last["content"].is_string() ? last["content"].get<std::string>() : "";
    const size_t at = text.empty() ? std::string::npos : prompt.rfind(text);
    if (at == std::string::npos)
      return invalid_param("continue_final_message",
                           "continue_final_message needs a final message with text that the chat template keeps "
                           "verbatim.",
                           "invalid_value");
    prompt.resize(at + text.size());
  }
  try {
    // The template already wrote BOS and friends, as transformers' apply_chat_template assumes.
    return tokenizer_->encode(prompt, /*add_special_tokens=*/false);
  } catch (const rs::Error& e) {
    return invalid_param("messages", fmt::format("The messages cannot be tokenized: {}", e.what()), "invalid_prompt");
  }
}

bool ModelText::harmony_chat() const {
  return chat_template_ && chat_template_->format() == chat::ChatFormat::kHarmony;
}

std::optional<int32_t> ModelText::token_id(std::string_view token) const {
  return tokenizer_ ? tokenizer_->token_to_id(token) : std::nullopt;
}

std::string ModelText::token_text(int32_t token) const {
  if (!tokenizer_) return fmt::format("token_id:{}", token);
  const int32_t ids[] = {token};
  return tokenizer_->decode(ids, /*skip_special_tokens=*/false);
}

std::string ModelText::token_bytes(int32_t token) const {
  return tokenizer_ ? tokenizer_->token_bytes(token) : std::string();
}

}  // namespace rs::server
