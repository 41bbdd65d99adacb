#include "loader/hf_config.h"

#include <algorithm>
#include <fstream>
#include <limits>

#include "base/error.h"

namespace rs::loader {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

json read_json(const fs::path& path) {
  std::ifstream in(path);
  RS_CHECK(in.good(), "{}: cannot open", path.string());
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    RS_FAIL("{}: not valid JSON: {}", path.string(), e.what());
  }
}

// Typed field access with errors that name the source file and the field.
class Fields {
 public:
  Fields(const json& object, std::string source) : object_(object), source_(std::move(source)) {}

  bool has(const char* key) const { return object_.contains(key) && !object_[key].is_null(); }

  template <typename T>
  T get(const char* key) const {
    RS_CHECK(has(key), "{}: missing field '{}'", source_, key);
    return as<T>(key);
  }
  template <typename T>
  T get_or(const char* key, T fallback) const {
    return has(key) ? as<T>(key) : fallback;
  }

 private:
  template <typename T>
  T as(const char* key) const {
    const json& value = object_[key];
    bool ok = false;
    if constexpr (std::is_same_v<T, bool>)
      ok = value.is_boolean();
    else if constexpr (std::is_integral_v<T>)
      ok = value.is_number_integer() &&
           (value.is_number_unsigned()
                ? value.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<T>::max())
                : value.get<int64_t>() >= static_cast<int64_t>(std::numeric_limits<T>::min()) &&
                      value.get<int64_t>() <= static_cast<int64_t>(std::numeric_limits<T>::max()));
    else if constexpr (std::is_floating_point_v<T>)
      ok = value.is_number();
    else
      ok = value.is_string();
    RS_CHECK(ok, "{}: field '{}' has the wrong type: {}", source_, key, value.dump());
    return value.get<T>();
  }

  const json& object_;
  std::string source_;
};

std::vector<int32_t> token_ids(const json& value) {
  std::vector<int32_t> out;
  if (value.is_number_integer()) out.push_back(value.get<int32_t>());
  if (value.is_array())
    for (const auto& id : value)
      if (id.is_number_integer()) out.push_back(id.get<int32_t>());
  return out;
}

RopeConfig parse_rope(const json& config, const Fields& fields, const std::string& source,
                      double default_partial_rotary_factor) {
  RopeConfig rope;
  const json* params = nullptr;
  if (config.contains("rope_parameters") && config["rope_parameters"].is_object()) params = &config["rope_parameters"];
  if (config.contains("rope_scaling") && config["rope_scaling"].is_object()) params = &config["rope_scaling"];
  rope.theta = fields.get_or<double>("rope_theta", 10000.0);
  rope.partial_rotary_factor = fields.get_or<double>("partial_rotary_factor", default_partial_rotary_factor);
  if (!params) return rope;
  Fields p(*params, source + " rope parameters");
  rope.theta = p.get_or<double>("rope_theta", rope.theta);
  rope.partial_rotary_factor = p.get_or<double>("partial_rotary_factor", rope.partial_rotary_factor);
  rope.type = p.has("rope_type") ? p.get<std::string>("rope_type") : p.get_or<std::string>("type", "default");
  rope.factor = p.get_or<double>("factor", 1.0);
  rope.low_freq_factor = p.get_or<double>("low_freq_factor", 1.0);
  rope.high_freq_factor = p.get_or<double>("high_freq_factor", 4.0);
  rope.original_max_position = p.get_or<int64_t>("original_max_position_embeddings", 0);
  rope.beta_fast = p.get_or<double>("beta_fast", 32.0);
  rope.beta_slow = p.get_or<double>("beta_slow", 1.0);
  rope.truncate = p.get_or<bool>("truncate", true);
  if (p.has("attention_factor")) rope.attention_factor = p.get<double>("attention_factor");
  if (p.has("mscale")) rope.mscale = p.get<double>("mscale");
  if (p.has("mscale_all_dim")) rope.mscale_all_dim = p.get<double>("mscale_all_dim");
  if (params->contains("freq_factors")) {
    const json& factors = (*params)["freq_factors"];
    RS_CHECK(factors.is_array() && std::all_of(factors.begin(), factors.end(),
                                               [](const json& f) { return f.is_number() && f.get<double>() > 0; }),
             "{}: rope freq_factors must be an array of positive numbers", source);
    for (const auto& f : factors) rope.freq_factors.push_back(f.get<float>());
  }
  static const char* kKnown[] = {"default", "linear", "llama3", "yarn"};
  RS_CHECK(std::find(std::begin(kKnown), std::end(kKnown), rope.type) != std::end(kKnown),
           "{}: unsupported rope type '{}' (supported: default, linear, llama3, yarn)", source, rope.type);
  return rope;
}

DType parse_dtype(const std::string& name, const std::string& source) {
  if (name == "bfloat16") return DType::kBF16;
  if (name == "float32") return DType::kF32;
  if (name == "float16") return DType::kF16;
  RS_FAIL("{}: unsupported torch_dtype '{}'", source, name);
}

// The hybrid Qwen families (transformers' qwen3_next, qwen3_5_text, qwen3_5_moe_text configs): their defaults differ
// from the Llama template's (head_dim 256, partial RoPE 0.25, a layer pattern from full_attention_interval).
bool is_hybrid_qwen(const std::string& model_type) {
  return model_type == "qwen3_next" || model_type.rfind("qwen3_5", 0) == 0;
}

void parse_linear_attention(const Fields& f, const std::string& source, ModelConfig& config) {
  LinearAttentionConfig& linear = config.linear;
  linear.num_key_heads = f.get_or<int32_t>("linear_num_key_heads", 16);
  linear.num_value_heads = f.get_or<int32_t>("linear_num_value_heads", 32);
  linear.key_head_dim = f.get_or<int32_t>("linear_key_head_dim", 128);
  linear.value_head_dim = f.get_or<int32_t>("linear_value_head_dim", 128);
  linear.conv_kernel = f.get_or<int32_t>("linear_conv_kernel_dim", 4);
  RS_CHECK(linear.num_key_heads > 0 && linear.num_value_heads > 0 && linear.key_head_dim > 0 &&
               linear.value_head_dim > 0 && linear.num_key_heads <= 4096 && linear.num_value_heads <= 4096 &&
               linear.key_head_dim <= 4096 && linear.value_head_dim <= 4096,
           "{}: linear_num_key_heads, linear_num_value_heads, linear_key_head_dim and linear_value_head_dim must be "
           "in [1, 4096]",
           source);
  RS_CHECK(linear.num_value_heads % linear.num_key_heads == 0,
           "{}: linear_num_value_heads {} is not a multiple of linear_num_key_heads {}", source, linear.num_value_heads,
           linear.num_key_heads);
  RS_CHECK(linear.conv_kernel >= 2 && linear.conv_kernel <= 64, "{}: linear_conv_kernel_dim {} must be in [2, 64]",
           source, linear.conv_kernel);
}

// DFlash drafters: dflash_config's keys, or the same keys at the top level (as z-lab's model reads them).
void parse_dflash(const json& raw, const Fields& top, const std::string& source, ModelConfig& config) {
  RS_CHECK(config.architecture == "DFlashDraftModel",
           "{}: {} drafters (grouped dynamic convolutions and a candidate selector) are not supported; "
           "DFlashDraftModel checkpoints are",
           source, config.architecture);
  const bool nested = raw.contains("dflash_config") && raw["dflash_config"].is_object();
  const Fields inner(nested ? raw["dflash_config"] : raw, source + (nested ? " dflash_config" : ""));
  const auto& pick = [&](const char* key) -> const Fields& { return inner.has(key) ? inner : top; };
  ModelConfig::DFlashConfig& dflash = config.dflash;
  dflash.block_size = pick("block_size").get_or<int32_t>("block_size", 16);
  RS_CHECK(dflash.block_size >= 2 && dflash.block_size <= 64, "{}: block_size {} must be in [2, 64]", source,
           dflash.block_size);
  dflash.mask_token_id = pick("mask_token_id").get<int32_t>("mask_token_id");
  RS_CHECK(dflash.mask_token_id >= 0 && dflash.mask_token_id < config.vocab_size,
           "{}: mask_token_id {} is outside the vocabulary of {} tokens", source, dflash.mask_token_id,
           config.vocab_size);
  const json& holder = nested && raw["dflash_config"].contains("target_layer_ids") ? raw["dflash_config"] : raw;
  RS_CHECK(holder.contains("target_layer_ids") && holder["target_layer_ids"].is_array() &&
               !holder["target_layer_ids"].empty() && holder["target_layer_ids"].size() <= 64,
           "{}: a DFlash drafter must list 1-64 target_layer_ids", source);
  for (const auto& id : holder["target_layer_ids"]) {
    RS_CHECK(id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<int64_t>() < 4096,
             "{}: target_layer_ids holds {}, not a layer index", source, id.dump());
    dflash.target_layer_ids.push_back(id.get<int32_t>());
  }
  // Greedy drafting takes the argmax, which output_multiplier (> 0) and final_logit_softcapping (monotone) keep.
  const double multiplier = pick("output_multiplier").get_or<double>("output_multiplier", 1.0);
  RS_CHECK(multiplier > 0, "{}: output_multiplier {} must be positive", source, multiplier);
  const double embed_scale = pick("input_embedding_scale").get_or<double>("input_embedding_scale", 1.0);
  RS_CHECK(embed_scale == 1.0, "{}: input_embedding_scale {} is not supported (1 only)", source, embed_scale);
  const bool has_causal = top.has("is_causal");
  const bool causal = top.get_or<bool>("is_causal", false);
  for (int32_t i = 0; i < config.num_layers; ++i)
    dflash.causal.push_back(has_causal ? causal : config.layer_windows[i] > 0);
}

}  // namespace

int32_t ModelConfig::num_layers_of(LayerKind kind) const {
  return static_cast<int32_t>(std::count(layer_kinds.begin(), layer_kinds.end(), kind));
}

bool ModelConfig::is_moe_layer(int32_t layer) const {
  if (num_experts == 0) return false;
  if (std::find(mlp_only_layers.begin(), mlp_only_layers.end(), layer) != mlp_only_layers.end()) return false;
  return (layer + 1) % std::max(1, decoder_sparse_step) == 0;
}

ModelConfig parse_model_config(const json& raw, const std::string& source) {
  RS_CHECK(raw.is_object(), "{}: config is not a JSON object", source);
  ModelConfig config;
  config.raw = raw;
  const json& text = raw.contains("text_config") && raw["text_config"].is_object() ? raw["text_config"] : raw;
  Fields top(raw, source);
  Fields f(text, source);
  RS_CHECK(raw.contains("architectures") && raw["architectures"].is_array() && !raw["architectures"].empty() &&
               raw["architectures"][0].is_string(),
           "{}: missing field 'architectures'", source);
  config.architecture = raw["architectures"][0].get<std::string>();
  config.model_type = f.get_or<std::string>("model_type", top.get_or<std::string>("model_type", ""));
  config.hidden_size = f.get<int32_t>("hidden_size");
  config.num_layers = f.get<int32_t>("num_hidden_layers");
  config.num_heads = f.get<int32_t>("num_attention_heads");
  config.num_kv_heads = f.get_or<int32_t>("num_key_value_heads", config.num_heads);
  config.vocab_size = f.get<int32_t>("vocab_size");
  config.intermediate_size = f.get_or<int32_t>("intermediate_size", 0);
  RS_CHECK(config.hidden_size > 0 && config.num_layers > 0 && config.num_heads > 0 && config.num_kv_heads > 0 &&
               config.vocab_size > 0,
           "{}: hidden_size, num_hidden_layers, num_attention_heads, num_key_value_heads and vocab_size must be "
           "positive",
           source);
  // Per-layer tables are sized by num_hidden_layers: a corrupt value must not become a multi-GiB allocation.
  RS_CHECK(config.num_layers <= 4096, "{}: num_hidden_layers {} is not plausible (at most 4096)", source,
           config.num_layers);
  RS_CHECK(config.num_heads % config.num_kv_heads == 0,
           "{}: num_attention_heads {} is not a multiple of "
           "num_key_value_heads {}",
           source, config.num_heads, config.num_kv_heads);
  const bool hybrid = is_hybrid_qwen(config.model_type);
  config.head_dim = f.get_or<int32_t>("head_dim", hybrid ? 256 : config.hidden_size / config.num_heads);
  RS_CHECK(config.head_dim > 0, "{}: head_dim must be positive", source);
  config.max_position_embeddings = f.get_or<int64_t>("max_position_embeddings", 2048);
  config.rms_norm_eps = f.get_or<double>("rms_norm_eps", 1e-6);
  config.tie_word_embeddings = top.get_or<bool>("tie_word_embeddings", f.get_or<bool>("tie_word_embeddings", false));
  config.attention_bias = f.get_or<bool>("attention_bias", false);
  config.rope = parse_rope(text, f, source, hybrid ? 0.25 : 1.0);
  if (config.architecture.size() > 24 &&
      config.architecture.compare(config.architecture.size() - 24, 24, "ForConditionalGeneration") == 0)
    config.weight_prefix = "model.language_model.";
  // A base model (Qwen3Model, LlamaModel: no LM head) serves embeddings; its tensors carry no "model." prefix when
  // saved on their own (the loader finds either).
  config.embedding_detected = config.architecture.ends_with("Model") && !config.architecture.ends_with("DraftModel");
  config.is_matryoshka = top.get_or<bool>("is_matryoshka", false);
  if (raw.contains("matryoshka_dimensions") && raw["matryoshka_dimensions"].is_array()) {
    config.matryoshka_dimensions = raw["matryoshka_dimensions"].get<std::vector<int32_t>>();
    config.is_matryoshka = true;
  }
  // Per-layer attention windows.
  const int32_t window = f.get_or<int32_t>("sliding_window", 0);
  config.layer_windows.assign(config.num_layers, 0);
  config.layer_kinds.assign(config.num_layers, LayerKind::kAttention);
  if (text.contains("layer_types") && text["layer_types"].is_array()) {
    const json& types = text["layer_types"];
    RS_CHECK(static_cast<int32_t>(types.size()) == config.num_layers, "{}: layer_types has {} entries for {} layers",
             source, types.size(), config.num_layers);
    for (int32_t i = 0; i < config.num_layers; ++i) {
      RS_CHECK(types[i].is_string(), "{}: layer_types[{}] is not a string", source, i);
      const std::string type = types[i].get<std::string>();
      RS_CHECK(type == "full_attention" || type == "sliding_attention" || (hybrid && type == "linear_attention"),
               "{}: layer_types[{}] = '{}' is not supported for model_type '{}' (full_attention, sliding_attention{})",
               source, i, type, config.model_type, hybrid ? ", linear_attention" : "");
      if (type == "linear_attention") config.layer_kinds[i] = LayerKind::kLinearAttention;
      if (type == "sliding_attention") {
        RS_CHECK(window > 0, "{}: layer {} is sliding_attention but sliding_window is not set", source, i);
        config.layer_windows[i] = window;
      }
    }
  } else if (hybrid) {
    const int32_t interval = f.get_or<int32_t>("full_attention_interval", 4);
    RS_CHECK(interval > 0, "{}: full_attention_interval must be positive, got {}", source, interval);
    for (int32_t i = 0; i < config.num_layers; ++i)
      if ((i + 1) % interval != 0) config.layer_kinds[i] = LayerKind::kLinearAttention;
  } else if (config.model_type == "gpt_oss" && window > 0) {
    for (int32_t i = 0; i < config.num_layers; i += 2) config.layer_windows[i] = window;
  } else if (f.get_or<bool>("use_sliding_window", false) && window > 0) {
    const int32_t max_window_layers = f.get_or<int32_t>("max_window_layers", config.num_layers);
    for (int32_t i = max_window_layers; i < config.num_layers; ++i) config.layer_windows[i] = window;
  }
  // Mixture of experts.
  config.num_experts = f.get_or<int32_t>("num_experts", f.get_or<int32_t>("num_local_experts", 0));
  config.num_experts_per_tok = f.get_or<int32_t>("num_experts_per_tok", f.get_or<int32_t>("experts_per_token", 0));
  config.moe_intermediate_size = f.get_or<int32_t>("moe_intermediate_size", config.intermediate_size);
  config.norm_topk_prob = f.get_or<bool>("norm_topk_prob", false);
  config.decoder_sparse_step = f.get_or<int32_t>("decoder_sparse_step", 1);
  if (text.contains("mlp_only_layers") && text["mlp_only_layers"].is_array())
    for (const auto& layer : text["mlp_only_layers"]) config.mlp_only_layers.push_back(layer.get<int32_t>());
  config.swiglu_limit = f.get_or<double>("swiglu_limit", 7.0);
  config.shared_expert_intermediate_size = f.get_or<int32_t>("shared_expert_intermediate_size", 0);
  if (hybrid) {
    config.attn_output_gate = true;
    // Qwen3-Next defaults to renormalised top-k weights; Qwen3.5-MoE's router always renormalises (no field).
    config.norm_topk_prob = config.model_type.rfind("qwen3_5_moe", 0) == 0 || f.get_or<bool>("norm_topk_prob", true);
    if (config.num_layers_of(LayerKind::kLinearAttention) > 0) parse_linear_attention(f, source, config);
  }
  if (config.architecture == "LlamaForCausalLMEagle3") {
    config.draft_vocab_size = f.get_or<int32_t>("draft_vocab_size", config.vocab_size);
    config.eagle_lm_head = config.tie_word_embeddings  ? ModelConfig::EagleLmHead::kTargetEmbedding
                           : f.has("draft_vocab_size") ? ModelConfig::EagleLmHead::kOwn
                                                       : ModelConfig::EagleLmHead::kTargetHead;
    RS_CHECK(config.eagle_lm_head == ModelConfig::EagleLmHead::kOwn || config.draft_vocab_size == config.vocab_size,
             "{}: an EAGLE-3 head with tied word embeddings predicts the whole vocabulary, not draft_vocab_size {}",
             source, config.draft_vocab_size);
    config.eagle_target_hidden = f.get_or<int32_t>("target_hidden_size", config.hidden_size);
    RS_CHECK(config.draft_vocab_size > 0 && config.draft_vocab_size <= config.vocab_size && config.num_layers == 1,
             "{}: an EAGLE-3 head has one layer and 1..vocab_size draft tokens (num_hidden_layers {}, "
             "draft_vocab_size {})",
             source, config.num_layers, config.draft_vocab_size);
    if (raw.contains("eagle_config") && raw["eagle_config"].is_object() &&
        raw["eagle_config"].contains("eagle_aux_hidden_state_layer_ids")) {
      const json& ids = raw["eagle_config"]["eagle_aux_hidden_state_layer_ids"];
      RS_CHECK(ids.is_array() && ids.size() == 3, "{}: eagle_aux_hidden_state_layer_ids must list 3 layers", source);
      for (const auto& id : ids) {
        RS_CHECK(id.is_number_integer() && id.get<int64_t>() >= -1 && id.get<int64_t>() < 4096,
                 "{}: eagle_aux_hidden_state_layer_ids holds {}, not a layer index", source, id.dump());
        config.eagle_layer_ids.push_back(id.get<int32_t>() + 1);
      }
    }
  }
  if (config.architecture == "DFlashDraftModel" || config.architecture == "DFlash2DraftModel")
    parse_dflash(raw, top, source, config);
  if (config.num_experts > 0)
    RS_CHECK(config.num_experts_per_tok > 0 && config.num_experts_per_tok <= config.num_experts,
             "{}: num_experts_per_tok {} must be in [1, {}]", source, config.num_experts_per_tok, config.num_experts);
  // Tokens and dtype.
  if (raw.contains("eos_token_id")) config.eos_token_ids = token_ids(raw["eos_token_id"]);
  if (top.has("bos_token_id") && raw["bos_token_id"].is_number_integer())
    config.bos_token_id = raw["bos_token_id"].get<int32_t>();
  if (top.has("pad_token_id") && raw["pad_token_id"].is_number_integer())
    config.pad_token_id = raw["pad_token_id"].get<int32_t>();
  const std::string dtype_key = top.has("torch_dtype") ? "torch_dtype" : "dtype";
  if (top.has(dtype_key.c_str())) config.dtype = parse_dtype(top.get<std::string>(dtype_key.c_str()), source);
  if (raw.contains("quantization_config") && raw["quantization_config"].is_object())
    config.quant_method = Fields(raw["quantization_config"], source).get_or<std::string>("quant_method", "unknown");
  config.quantization = parse_quantization_config(raw, source);
  return config;
}

std::vector<int32_t> ModelConfig::eagle_capture_layers(int32_t target_layers) const {
  std::vector<int32_t> layers = eagle_layer_ids;
  if (layers.empty()) layers = {std::min(2, target_layers), target_layers / 2, std::max(0, target_layers - 3)};
  for (int32_t layer : layers)
    RS_CHECK(layer >= 0 && layer <= target_layers, "EAGLE-3 head reads layer {} of a {}-layer target", layer,
             target_layers);
  return layers;
}

std::vector<int32_t> ModelConfig::draft_capture_layers(int32_t target_layers) const {
  if (is_eagle3()) return eagle_capture_layers(target_layers);
  std::vector<int32_t> layers;
  for (int32_t id : dflash.target_layer_ids) {
    RS_CHECK(id >= 0 && id < target_layers, "the DFlash drafter reads layer {} of a {}-layer target", id,
             target_layers);
    layers.push_back(id + 1);
  }
  return layers;
}

namespace {

// A sentence-transformers folder (modules.json): an embedding model with the pooling of its Pooling module's
// config.json and normalised when a Normalize module follows.
void read_sentence_transformers(const fs::path& model_dir, ModelConfig& config) {
  const fs::path modules_path = model_dir / "modules.json";
  if (!fs::exists(modules_path)) return;
  const json modules = read_json(modules_path);
  if (!modules.is_array()) return;
  bool pooling = false, normalize = false;
  for (const json& module : modules) {
    if (!module.is_object() || !module.contains("type") || !module["type"].is_string()) continue;
    const std::string type = module["type"].get<std::string>();
    if (type == "sentence_transformers.models.Normalize") normalize = true;
    if (type != "sentence_transformers.models.Pooling") continue;
    pooling = true;
    const std::string folder = module.value("path", std::string("1_Pooling"));
    const fs::path pooling_path = model_dir / folder / "config.json";
    // Without its config (a partial copy) a decoder pools the last token, as vLLM assumes for them.
    if (!fs::exists(pooling_path)) continue;
    const json mode = read_json(pooling_path);
    config.embedding_pooling = mode.value("pooling_mode_lasttoken", false)     ? "last"
                               : mode.value("pooling_mode_mean_tokens", false) ? "mean"
                               : mode.value("pooling_mode_cls_token", false)   ? "cls"
                                                                               : "other (max or weighted)";
  }
  if (!pooling) return;
  config.embedding_detected = true;
  config.embedding_normalize = normalize;
}

}  // namespace

ModelConfig load_model_config(const fs::path& model_dir) {
  const fs::path path = model_dir / "config.json";
  RS_CHECK(fs::exists(path), "{}: no config.json in the model folder", model_dir.string());
  ModelConfig config = parse_model_config(read_json(path), path.string());
  read_sentence_transformers(model_dir, config);
  const fs::path generation = model_dir / "generation_config.json";
  if (fs::exists(generation)) {
    config.generation_defaults = read_json(generation);
    if (config.generation_defaults.contains("eos_token_id")) {
      auto ids = token_ids(config.generation_defaults["eos_token_id"]);
      if (!ids.empty()) config.eos_token_ids = ids;
    }
  }
  return config;
}

}  // namespace rs::loader
