#include "loader/gguf/gguf_tokenizer.h"

#include <string>

#include "base/error.h"

namespace rs::loader::gguf {
using nlohmann::json;

namespace {

// llama.cpp's token types (llama_token_type).
enum TokenType : int { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

struct PreTokenizer {
  const char* name;  // tokenizer.ggml.pre
  const char* regex;
  bool nfc;            // Qwen's tokenizer.json normalizes to NFC first
  bool ignore_merges;  // whole-word vocabulary hits skip the merges (Llama 3, o200k)
};

// The split patterns of the tokenizer.json files these pre-tokenizer names stand for (llama-vocab.cpp maps the same
// names to the same expressions).
constexpr PreTokenizer kPreTokenizers[] = {
    {"qwen2",
     R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
     true, false},
    {"qwen35",  // Qwen3.5's: combining marks join letters
     R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
     true, false},
    {"llama-bpe",
     R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
     false, true},
    {"gpt-4o",
     R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
     false, true},
    {"gpt2", R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)", false, false},
};

json byte_level(bool add_prefix_space = false) {
  return {{"type", "ByteLevel"}, {"add_prefix_space", add_prefix_space}, {"trim_offsets", false}, {"use_regex", false}};
}

std::optional<int64_t> id_of(const json& metadata, const std::string& key) {
  const auto it = metadata.find("tokenizer.ggml." + key);
  if (it == metadata.end() || !it->is_number_integer()) return std::nullopt;
  return it->get<int64_t>();
}

}  // namespace

std::optional<HfTokenizer> hf_tokenizer(const json& metadata) {
  if (!metadata.contains("tokenizer.ggml.model")) return std::nullopt;
  const std::string model =
      metadata["tokenizer.ggml.model"].is_string() ? metadata["tokenizer.ggml.model"].get<std::string>() : "";
  RS_CHECK(
      model == "gpt2",
      "GGUF tokenizer model '{}' is not served (radixserve reads byte-level BPE vocabularies, tokenizer.ggml.model "
      "\"gpt2\"); pass the Hugging Face folder instead",
      model);
  const json& tokens = metadata.value("tokenizer.ggml.tokens", json());
  RS_CHECK(tokens.is_array() && !tokens.empty(), "GGUF tokenizer has no tokenizer.ggml.tokens");
  const json& types = metadata.value("tokenizer.ggml.token_type", json::array());
  RS_CHECK(types.is_array() && (types.empty() || types.size() == tokens.size()),
           "GGUF tokenizer.ggml.token_type has {} entries for {} tokens", types.size(), tokens.size());
  const json& merges = metadata.value("tokenizer.ggml.merges", json::array());
  RS_CHECK(merges.is_array(), "GGUF tokenizer.ggml.merges is not an array");
  const std::string pre_name = metadata.value("tokenizer.ggml.pre", std::string("gpt2"));
  const PreTokenizer* pre = nullptr;
  // Other names llama.cpp gives the same expressions (DeepSeek-R1's Qwen distills, older Llama 3 conversions).
  std::string canonical = pre_name;
  if (canonical == "deepseek-r1-qwen") canonical = "qwen2";
  if (canonical == "llama3" || canonical == "llama-v3") canonical = "llama-bpe";
  if (canonical == "default") canonical = "gpt2";
  for (const PreTokenizer& candidate : kPreTokenizers)
    if (canonical == candidate.name) pre = &candidate;
  RS_CHECK(
      pre != nullptr,
      "GGUF pre-tokenizer '{}' is not known to radixserve (known: qwen2, qwen35, llama-bpe, gpt-4o, gpt2); pass the "
      "Hugging Face folder instead",
      pre_name);

  json vocab = json::object();
  json added = json::array();
  json added_decoder = json::object();
  for (size_t id = 0; id < tokens.size(); ++id) {
    RS_CHECK(tokens[id].is_string(), "GGUF token {} is not a string", id);
    const int type = types.empty() ? kNormal : types[id].get<int>();
    const std::string& text = tokens[id].get_ref<const std::string&>();
    if (type == kControl || type == kUserDefined) {
      const bool special = type == kControl;
      added.push_back({{"id", id},
                       {"content", text},
                       {"single_word", false},
                       {"lstrip", false},
                       {"rstrip", false},
                       {"normalized", false},
                       {"special", special}});
      added_decoder[std::to_string(id)] = {{"content", text}, {"special", special}};
    } else if (type == kNormal || type == kUnknown || type == kByte) {
      vocab[text] = id;
    }  // kUnused: padding holes ([PAD123]) that no text encodes to
  }

  HfTokenizer out;
  json& t = out.tokenizer;
  t["version"] = "1.0";
  t["truncation"] = nullptr;
  t["padding"] = nullptr;
  t["added_tokens"] = added;
  t["normalizer"] = pre->nfc ? json{{"type", "NFC"}} : json();
  t["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers",
       {{{"type", "Split"}, {"pattern", {{"Regex", pre->regex}}}, {"behavior", "Isolated"}, {"invert", false}},
        byte_level()}}};
  const auto bos = id_of(metadata, "bos_token_id");
  const auto eos = id_of(metadata, "eos_token_id");
  const auto token_text = [&](std::optional<int64_t> id) -> json {
    if (!id || *id < 0 || *id >= static_cast<int64_t>(tokens.size())) return nullptr;
    return tokens[*id];
  };
  const bool add_bos = metadata.value("tokenizer.ggml.add_bos_token", false) && !token_text(bos).is_null();
  const bool add_eos = metadata.value("tokenizer.ggml.add_eos_token", false) && !token_text(eos).is_null();
  if (add_bos || add_eos) {
    json single = json::array(), pair = json::array(), special = json::object();
    const auto piece = [](const json& content) { return json{{"SpecialToken", {{"id", content}, {"type_id", 0}}}}; };
    const auto sequence = [](const char* id, int type) { return json{{"Sequence", {{"id", id}, {"type_id", type}}}}; };
    if (add_bos) single.push_back(piece(token_text(bos)));
    single.push_back(sequence("A", 0));
    if (add_eos) single.push_back(piece(token_text(eos)));
    pair = single;
    if (add_bos) pair.push_back(piece(token_text(bos)));
    pair.push_back(sequence("B", 1));
    if (add_eos) pair.push_back(piece(token_text(eos)));
    for (const auto& [flag, id] : {std::pair{add_bos, bos}, std::pair{add_eos, eos}})
      if (flag) {
        const std::string text = token_text(id).get<std::string>();
        special[text] = {{"id", text}, {"ids", {*id}}, {"tokens", {text}}};
      }
    t["post_processor"] = {
        {"type", "TemplateProcessing"}, {"single", single}, {"pair", pair}, {"special_tokens", special}};
  } else {
    t["post_processor"] = byte_level();
  }
  t["decoder"] = byte_level();
  t["model"] = {{"type", "BPE"},
                {"dropout", nullptr},
                {"unk_token", nullptr},
                {"continuing_subword_prefix", nullptr},
                {"end_of_word_suffix", nullptr},
                {"fuse_unk", false},
                {"byte_fallback", false},
                {"ignore_merges", pre->ignore_merges},
                {"vocab", std::move(vocab)},
                {"merges", merges}};

  json& c = out.tokenizer_config;
  c["added_tokens_decoder"] = added_decoder;
  c["bos_token"] = token_text(bos);
  c["eos_token"] = token_text(eos);
  if (const json pad = token_text(id_of(metadata, "padding_token_id")); !pad.is_null()) c["pad_token"] = pad;
  c["add_bos_token"] = add_bos;
  c["add_eos_token"] = add_eos;
  c["model_max_length"] = 1 << 30;
  // tokenizer.chat_template, and named ones (tokenizer.chat_template.tool_use) as transformers' list of templates.
  json named = json::array();
  for (const auto& [key, value] : metadata.items()) {
    static const std::string kPrefix = "tokenizer.chat_template.";
    if (key.rfind(kPrefix, 0) == 0 && value.is_string())
      named.push_back({{"name", key.substr(kPrefix.size())}, {"template", value}});
  }
  if (metadata.contains("tokenizer.chat_template") && metadata["tokenizer.chat_template"].is_string()) {
    if (named.empty()) {
      c["chat_template"] = metadata["tokenizer.chat_template"];
    } else {
      named.insert(named.begin(), json{{"name", "default"}, {"template", metadata["tokenizer.chat_template"]}});
      c["chat_template"] = named;
    }
  }
  return out;
}

}  // namespace rs::loader::gguf
