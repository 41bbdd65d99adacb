// Tokenizer::load / from_json: tokenizer.json + tokenizer_config.json -> Pipeline.
#include <algorithm>
#include <fstream>

#include "base/error.h"
#include "tokenizer/pipeline.h"
#include "tokenizer/tokenizer.h"

namespace rs::tokenizer {
namespace {

const nlohmann::json& field(const nlohmann::json& object, const char* key) {
  static const nlohmann::json kNull;
  const auto it = object.find(key);
  return it == object.end() ? kNull : *it;
}

nlohmann::json read_json(const std::filesystem::path& path) {
  std::ifstream file(path);
  RS_CHECK(file.good(), "cannot open {}", path.string());
  try {
    return nlohmann::json::parse(file);
  } catch (const nlohmann::json::exception& error) {
    RS_FAIL("{} is not valid JSON: {}", path.string(), error.what());
  }
}

AddedToken parse_added_token(const nlohmann::json& entry, int32_t id) {
  AddedToken token;
  token.id = id;
  token.content = entry.at("content").get<std::string>();
  token.single_word = entry.value("single_word", false);
  token.lstrip = entry.value("lstrip", false);
  token.rstrip = entry.value("rstrip", false);
  token.normalized = entry.value("normalized", true);
  token.special = entry.value("special", false);
  return token;
}

// tokenizer_config.json gives tokens as "text" or {"content": "text", ...} (AddedToken dicts).
std::optional<std::string> config_token(const nlohmann::json& config, const char* key) {
  const nlohmann::json& value = field(config, key);
  if (value.is_string()) return value.get<std::string>();
  if (value.is_object() && value.contains("content")) return value.at("content").get<std::string>();
  return std::nullopt;
}

// Added tokens with the ids HF tokenizers assigns when it loads the file (AddedVocabulary::
// add_tokens): a content already in the vocab keeps its vocab id, a new one takes the next id
// after the vocab and the previous added tokens. A file whose ids disagree is rejected rather
// than silently encoded with different ids.
std::vector<AddedToken> added_tokens(const nlohmann::json& tokenizer_json, const nlohmann::json& config,
                                     const BpeModel& model, std::size_t model_vocab_entries) {
  std::vector<std::pair<nlohmann::json, int32_t>> entries;
  for (const auto& entry : field(tokenizer_json, "added_tokens")) {
    entries.emplace_back(entry, entry.at("id").get<int32_t>());
  }
  // transformers also adds tokenizer_config's added_tokens_decoder entries the file lacks.
  for (const auto& [id_text, entry] : field(config, "added_tokens_decoder").items()) {
    const int32_t id = std::stoi(id_text);
    const bool known =
        std::any_of(entries.begin(), entries.end(), [&](const auto& known_entry) { return known_entry.second == id; });
    if (!known) entries.emplace_back(entry, id);
  }
  std::vector<AddedToken> tokens;
  std::optional<int32_t> max_added_id;
  for (const auto& [entry, file_id] : entries) {
    AddedToken token = parse_added_token(entry, file_id);
    if (token.content.empty()) continue;
    std::optional<int32_t> assigned;
    for (const AddedToken& previous : tokens) {
      if (previous.content == token.content) assigned = previous.id;
    }
    if (!assigned) assigned = model.token_to_id(token.content);
    if (!assigned) {
      const auto vocab_entries = static_cast<int32_t>(model_vocab_entries);
      assigned = max_added_id && *max_added_id >= vocab_entries ? *max_added_id + 1 : vocab_entries;
    }
    RS_CHECK(*assigned == file_id,
             "unsupported tokenizer.json feature: added token '{}' has id {} but HF tokenizers "
             "would give it id {}",
             token.content, file_id, *assigned);
    max_added_id = std::max(max_added_id.value_or(file_id), file_id);
    tokens.push_back(std::move(token));
  }
  return tokens;
}

bool uses_bos_eos_template(const nlohmann::json& config) {
  const nlohmann::json& name = field(config, "tokenizer_class");
  if (!name.is_string()) return false;
  static const char* const kClasses[] = {"LlamaTokenizer",         "LlamaTokenizerFast", "CodeLlamaTokenizer",
                                         "CodeLlamaTokenizerFast", "GemmaTokenizer",     "GemmaTokenizerFast"};
  return std::find(std::begin(kClasses), std::end(kClasses), name.get<std::string>()) != std::end(kClasses);
}

}  // namespace

Tokenizer Tokenizer::load(const std::filesystem::path& model_dir) {
  const std::filesystem::path tokenizer_path = model_dir / "tokenizer.json";
  RS_CHECK(std::filesystem::exists(tokenizer_path), "no tokenizer.json in {}", model_dir.string());
  const std::filesystem::path config_path = model_dir / "tokenizer_config.json";
  const nlohmann::json config =
      std::filesystem::exists(config_path) ? read_json(config_path) : nlohmann::json::object();
  return from_json(read_json(tokenizer_path), config);
}

Tokenizer Tokenizer::from_json(const nlohmann::json& tokenizer_json, const nlohmann::json& tokenizer_config) {
  const nlohmann::json config = tokenizer_config.is_object() ? tokenizer_config : nlohmann::json::object();
  // truncation and padding are ignored: transformers switches both off for a plain encode.
  Normalizer normalizer = Normalizer::from_json(field(tokenizer_json, "normalizer"));
  PreTokenizer pre_tokenizer = PreTokenizer::from_json(field(tokenizer_json, "pre_tokenizer"));
  const nlohmann::json& model_json = tokenizer_json.at("model");
  BpeModel model = BpeModel::from_json(model_json, pre_tokenizer.byte_level());
  std::vector<AddedToken> tokens = added_tokens(tokenizer_json, config, model, model_json.at("vocab").size());
  int32_t vocab_size = model.id_limit();
  for (const AddedToken& token : tokens) vocab_size = std::max(vocab_size, token.id + 1);
  AddedVocabulary added(std::move(tokens), normalizer);

  std::optional<std::string> bos_token = config_token(config, "bos_token");
  std::optional<std::string> eos_token = config_token(config, "eos_token");
  auto id_of = [&](const std::optional<std::string>& token, const char* what) {
    RS_CHECK(token.has_value(), "tokenizer_config.json: {} is required by {}", what,
             field(config, "tokenizer_class").dump());
    std::optional<int32_t> id = added.token_to_id(*token);
    if (!id) id = model.token_to_id(*token);
    RS_CHECK(id.has_value(), "tokenizer_config.json: {} '{}' is not a token", what, *token);
    return *id;
  };
  PostProcessor post_processor;
  if (uses_bos_eos_template(config)) {
    const bool add_bos = field(config, "add_bos_token").is_boolean() ? config.at("add_bos_token").get<bool>() : true;
    const bool add_eos = field(config, "add_eos_token").is_boolean() ? config.at("add_eos_token").get<bool>() : false;
    post_processor =
        PostProcessor::bos_eos_template(add_bos ? std::optional(id_of(bos_token, "bos_token")) : std::nullopt,
                                        add_eos ? std::optional(id_of(eos_token, "eos_token")) : std::nullopt);
  } else {
    post_processor = PostProcessor::from_json(field(tokenizer_json, "post_processor"));
  }
  Decoder decoder = Decoder::from_json(field(tokenizer_json, "decoder"));

  auto pipeline = std::make_unique<Pipeline>(Pipeline{
      .normalizer = std::move(normalizer),
      .pre_tokenizer = std::move(pre_tokenizer),
      .model = std::move(model),
      .added = std::move(added),
      .post_processor = std::move(post_processor),
      .decoder = std::move(decoder),
      .config = config,
      .bos_token = std::move(bos_token),
      .eos_token = std::move(eos_token),
      .vocab_size = vocab_size,
  });
  return Tokenizer(std::move(pipeline));
}

}  // namespace rs::tokenizer
