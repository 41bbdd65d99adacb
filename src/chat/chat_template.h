// ChatTemplate: turns an OpenAI-style message list into the prompt text a model was trained on, from the
// model directory's HF chat template (Jinja, rendered as transformers does) or, for gpt-oss, natively in the
// harmony format.
#pragma once

#include <ctime>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "chat/template.h"
#include "chat/value.h"

namespace rs::chat {

enum class ChatFormat {
  kAuto,     // harmony for gpt_oss models (config.json model_type, a harmony-looking template, or harmony
             // tokens without a template); the Jinja chat template otherwise
  kJinja,    // always the model's Jinja chat template
  kHarmony,  // always the native gpt-oss renderer
};

class ChatTemplate {
 public:
  // Local time for strftime_now() and harmony's "Current date".
  using Clock = std::function<std::tm()>;

  // Reads <model_dir>/chat_template.jinja if present, else tokenizer_config.json's chat_template (a string,
  // or a list of {name, template}: "default", plus "tool_use" when tools are given); special tokens
  // (bos_token, eos_token, pad_token, ...) from tokenizer_config.json; model_type from config.json.
  // Throws rs::Error when files are missing or unreadable, TemplateError (line:column) on a syntax error.
  // template_file (serve --chat-template): a Jinja file used instead of the model's template (special tokens still
  // come from the model folder).
  static ChatTemplate load(const std::filesystem::path& model_dir, ChatFormat format = ChatFormat::kAuto,
                           const std::filesystem::path& template_file = {});

  // Renders like transformers' apply_chat_template(messages, tools=extra["tools"], add_generation_prompt,
  // **extra): the template sees messages, tools (none when absent), documents (none),
  // add_generation_prompt, the special tokens, and every key of `extra` (enable_thinking,
  // reasoning_effort, date_string, ...). `extra` must be a JSON object (or null).
  // JSON objects keep their key order (tool schemas print in the order the client sent them), hence
  // ordered_json; a plain nlohmann::json converts implicitly but its keys are already sorted.
  // Throws TemplateRaised when the template rejects the input (raise_exception: map to HTTP 400) and
  // TemplateError when rendering fails (an undefined value used, a type error). Thread-safe.
  std::string render(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                     const nlohmann::ordered_json& extra = nlohmann::ordered_json::object()) const;

  // kJinja or kHarmony: the renderer load() chose.
  ChatFormat format() const { return format_; }
  // Special tokens from tokenizer_config.json ("" when absent).
  std::string bos_token() const;
  std::string eos_token() const;
  // Replaces the local-time clock (tests pin the date this way).
  void set_clock(Clock clock) { clock_ = std::move(clock); }

 private:
  ChatFormat format_ = ChatFormat::kJinja;
  std::map<std::string, Template> templates_;  // by name; a single template is "default"
  Dict special_tokens_;                        // transformers' special_tokens_map
  Clock clock_;
};

}  // namespace rs::chat
