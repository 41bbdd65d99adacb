// ChatTemplate loading (template source, special tokens, format choice) and rendering.
#include "chat/chat_template.h"

#include <fstream>
#include <optional>
#include <sstream>

#include "base/error.h"
#include "chat/harmony_renderer.h"

namespace rs::chat {
namespace {

constexpr std::string_view kSpecialTokenKeys[] = {"bos_token", "eos_token", "unk_token", "sep_token",
                                                  "pad_token", "cls_token", "mask_token"};

std::optional<std::string> read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

nlohmann::ordered_json read_json(const std::filesystem::path& path) {
  const auto text = read_file(path);
  if (!text) return nullptr;
  try {
    return nlohmann::ordered_json::parse(*text);
  } catch (const nlohmann::json::exception& error) {
    RS_FAIL("{}: invalid JSON: {}", path.string(), error.what());
  }
}

// A special token is a string or an AddedToken object {"content": ...}.
std::optional<std::string> token_text(const nlohmann::ordered_json& token) {
  if (token.is_string()) return token.get<std::string>();
  if (token.is_object() && token.contains("content") && token["content"].is_string())
    return token["content"].get<std::string>();
  return std::nullopt;
}

bool looks_like_harmony(const std::string& source) {
  return source.find("<|channel|>") != std::string::npos && source.find("<|start|>") != std::string::npos &&
         source.find("<|message|>") != std::string::npos;
}

bool has_harmony_tokens(const nlohmann::ordered_json& tokenizer_config) {
  if (!tokenizer_config.is_object() || !tokenizer_config.contains("added_tokens_decoder")) return false;
  bool channel = false;
  bool start = false;
  for (const auto& token : tokenizer_config["added_tokens_decoder"]) {
    const auto content = token_text(token);
    channel = channel || content == "<|channel|>";
    start = start || content == "<|start|>";
  }
  return channel && start;
}

std::tm local_now() {
  const std::time_t seconds = std::time(nullptr);
  std::tm now{};
  localtime_r(&seconds, &now);
  return now;
}

}  // namespace

ChatTemplate ChatTemplate::load(const std::filesystem::path& model_dir, ChatFormat format,
                                const std::filesystem::path& template_file) {
  RS_CHECK(std::filesystem::is_directory(model_dir), "model directory not found: {}", model_dir.string());
  const auto tokenizer_config = read_json(model_dir / "tokenizer_config.json");
  const auto config = read_json(model_dir / "config.json");

  ChatTemplate result;
  result.clock_ = local_now;
  if (tokenizer_config.is_object()) {
    for (std::string_view key : kSpecialTokenKeys) {
      const auto found = tokenizer_config.find(std::string(key));
      if (found == tokenizer_config.end()) continue;
      if (const auto text = token_text(*found)) result.special_tokens_.set(std::string(key), Value::string(*text));
    }
    const auto extra = tokenizer_config.find("additional_special_tokens");
    if (extra != tokenizer_config.end() && extra->is_array() && !extra->empty()) {
      List tokens;
      for (const auto& token : *extra) {
        if (const auto text = token_text(token)) tokens.push_back(Value::string(*text));
      }
      result.special_tokens_.set("additional_special_tokens", Value::list(std::move(tokens)));
    }
  }

  std::map<std::string, std::string> sources;
  if (!template_file.empty()) {
    const auto jinja = read_file(template_file);
    RS_CHECK(jinja.has_value(), "chat template file not found or unreadable: {}", template_file.string());
    sources["default"] = *jinja;
    if (format == ChatFormat::kAuto) format = ChatFormat::kJinja;  // the file is the template, whatever the model
  } else if (const auto jinja = read_file(model_dir / "chat_template.jinja")) {
    sources["default"] = *jinja;
  } else if (tokenizer_config.is_object() && tokenizer_config.contains("chat_template")) {
    const auto& chat_template = tokenizer_config["chat_template"];
    if (chat_template.is_string()) {
      sources["default"] = chat_template.get<std::string>();
    } else if (chat_template.is_array()) {
      for (const auto& entry : chat_template) {
        RS_CHECK(entry.is_object() && entry.value("name", nlohmann::ordered_json()).is_string() &&
                     entry.value("template", nlohmann::ordered_json()).is_string(),
                 "{}: chat_template entries must be {{name, template}} objects", model_dir.string());
        sources[entry["name"].get<std::string>()] = entry["template"].get<std::string>();
      }
    }
  }

  const bool gpt_oss = config.is_object() && config.value("model_type", "") == "gpt_oss";
  if (format == ChatFormat::kAuto) {
    const auto found = sources.find("default");
    if (gpt_oss || (found != sources.end() && looks_like_harmony(found->second)) ||
        (sources.empty() && has_harmony_tokens(tokenizer_config))) {
      format = ChatFormat::kHarmony;
    } else {
      format = ChatFormat::kJinja;
    }
  }
  result.format_ = format;
  if (format == ChatFormat::kJinja) {
    RS_CHECK(!sources.empty(), "{}: no chat template (chat_template.jinja or tokenizer_config.json chat_template)",
             model_dir.string());
    for (const auto& [name, source] : sources) result.templates_.emplace(name, Template::parse(source));
  }
  return result;
}

std::string ChatTemplate::render(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                                 const nlohmann::ordered_json& extra) const {
  RS_CHECK(extra.is_null() || extra.is_object(), "chat template kwargs must be a JSON object");
  Dict variables = special_tokens_;
  variables.set("messages", Value::from_json(messages));
  variables.set("tools", Value::none());
  variables.set("documents", Value::none());
  variables.set("add_generation_prompt", Value::boolean(add_generation_prompt));
  if (extra.is_object()) {
    for (auto it = extra.begin(); it != extra.end(); ++it) {
      RS_CHECK(it.key() != "messages" && it.key() != "add_generation_prompt", "chat template kwarg '{}' is reserved",
               it.key());
      variables.set(it.key(), Value::from_json(it.value()));
    }
  }
  const std::tm now = clock_ ? clock_() : local_now();
  if (format_ == ChatFormat::kHarmony) return render_harmony(variables, now);

  const bool has_tools = !variables.find("tools")->is_none();
  auto chosen = templates_.end();
  if (has_tools) chosen = templates_.find("tool_use");
  if (chosen == templates_.end()) chosen = templates_.find("default");
  RS_CHECK(chosen != templates_.end(), "no \"default\" chat template among the named templates");
  return chosen->second.render(variables, now);
}

std::string ChatTemplate::bos_token() const {
  const Value* token = special_tokens_.find("bos_token");
  return token != nullptr ? token->as_string() : "";
}

std::string ChatTemplate::eos_token() const {
  const Value* token = special_tokens_.find("eos_token");
  return token != nullptr ? token->as_string() : "";
}

}  // namespace rs::chat
