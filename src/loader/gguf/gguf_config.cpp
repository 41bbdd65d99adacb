#include "loader/gguf/gguf_config.h"

#include <algorithm>
#include <vector>

#include "base/error.h"
#include "loader/gguf/blocks.h"

namespace rs::loader::gguf {
using nlohmann::json;

namespace {

struct Architecture {
  const char* gguf;  // general.architecture
  const char* hf;    // architectures[0]
  const char* model_type;
};
constexpr Architecture kArchitectures[] = {
    {"llama", "LlamaForCausalLM", "llama"},
    {"qwen3", "Qwen3ForCausalLM", "qwen3"},
    {"qwen3moe", "Qwen3MoeForCausalLM", "qwen3_moe"},
    {"gpt-oss", "GptOssForCausalLM", "gpt_oss"},
    {"qwen3next", "Qwen3NextForCausalLM", "qwen3_next"},
    {"qwen35", "Qwen3_5ForCausalLM", "qwen3_5_text"},
    {"qwen35moe", "Qwen3_5MoeForCausalLM", "qwen3_5_moe_text"},
};

// Metadata access that names the file's key in errors. Per-layer keys may be arrays (llama.cpp allows them for
// head counts and feed-forward lengths); radixserve needs them uniform.
class Keys {
 public:
  Keys(const json& metadata, std::string arch) : metadata_(metadata), arch_(std::move(arch)) {}

  bool has(const std::string& key) const { return metadata_.contains(arch_ + "." + key); }
  int64_t integer(const std::string& key) const {
    const json& value = at(key);
    if (value.is_array()) {
      RS_CHECK(!value.empty() && value.front().is_number_integer() &&
                   std::all_of(value.begin(), value.end(), [&](const json& v) { return v == value.front(); }),
               "GGUF key '{}.{}' varies by layer ({}), which radixserve does not serve", arch_, key, shown(value));
      return value.front().get<int64_t>();
    }
    RS_CHECK(value.is_number_integer(), "GGUF key '{}.{}' is not an integer: {}", arch_, key, shown(value));
    return value.get<int64_t>();
  }
  int64_t integer_or(const std::string& key, int64_t fallback) const { return has(key) ? integer(key) : fallback; }
  double number_or(const std::string& key, double fallback) const {
    if (!has(key)) return fallback;
    const json& value = at(key);
    RS_CHECK(value.is_number(), "GGUF key '{}.{}' is not a number: {}", arch_, key, shown(value));
    return value.get<double>();
  }
  std::string string_or(const std::string& key, const std::string& fallback) const {
    return has(key) && at(key).is_string() ? at(key).get<std::string>() : fallback;
  }

 private:
  const json& at(const std::string& key) const {
    const auto it = metadata_.find(arch_ + "." + key);
    RS_CHECK(it != metadata_.end(), "GGUF file lacks the key '{}.{}'", arch_, key);
    return *it;
  }
  const json& metadata_;
  std::string arch_;
};

// general.file_type (llama_ftype): all F32 (0), mostly F16 (1), mostly BF16 (32); the quantized types compute in bf16.
const char* dtype_of(const json& metadata) {
  const int64_t file_type = metadata.value("general.file_type", int64_t{-1});
  if (file_type == 0) return "float32";
  if (file_type == 1) return "float16";
  return "bfloat16";
}

std::optional<int64_t> token_id(const json& metadata, const char* key) {
  const auto it = metadata.find(key);
  if (it == metadata.end() || !it->is_number_integer()) return std::nullopt;
  return it->get<int64_t>();
}

}  // namespace

json hf_config(const GgufWeights& weights) {
  const json& meta = weights.metadata();
  const std::string arch = meta.value("general.architecture", std::string());
  const auto known = std::find_if(std::begin(kArchitectures), std::end(kArchitectures),
                                  [&](const Architecture& a) { return arch == a.gguf; });
  RS_CHECK(known != std::end(kArchitectures),
           "GGUF architecture '{}' is not served from GGUF (radixserve reads llama, qwen3, qwen3moe, gpt-oss, "
           "qwen3next, qwen35 and qwen35moe GGUF files; for others, serve the Hugging Face checkpoint)",
           arch);
  const Keys k(meta, arch);
  json config;
  config["architectures"] = {known->hf};
  config["model_type"] = known->model_type;
  config["hidden_size"] = k.integer("embedding_length");
  config["num_hidden_layers"] = weights.block_count();
  const int64_t heads = k.integer("attention.head_count");
  config["num_attention_heads"] = heads;
  config["num_key_value_heads"] = k.integer_or("attention.head_count_kv", heads);
  config["head_dim"] = k.integer_or("attention.key_length", k.integer("embedding_length") / heads);
  config["intermediate_size"] = k.integer_or("feed_forward_length", 0);
  config["rms_norm_eps"] = k.number_or("attention.layer_norm_rms_epsilon", 1e-6);
  config["max_position_embeddings"] = k.integer_or("context_length", 4096);
  const TensorRecord* embedding = weights.record("token_embd.weight");
  RS_CHECK(embedding && embedding->ne.size() == 2, "GGUF file has no 2-D token_embd.weight");
  config["vocab_size"] = k.integer_or("vocab_size", embedding->ne[1]);
  config["tie_word_embeddings"] = weights.record("output.weight") == nullptr;
  config["attention_bias"] = weights.record("blk.0.attn_q.bias") != nullptr;
  config["dtype"] = dtype_of(meta);

  json rope = {{"rope_type", "default"}, {"rope_theta", k.number_or("rope.freq_base", 10000.0)}};
  const std::string scaling = k.string_or("rope.scaling.type", "none");
  if (scaling == "linear" || scaling == "yarn") {
    rope["rope_type"] = scaling;
    rope["factor"] = k.number_or("rope.scaling.factor", 1.0);
    if (k.has("rope.scaling.original_context_length"))
      rope["original_max_position_embeddings"] = k.integer("rope.scaling.original_context_length");
  } else {
    RS_CHECK(scaling == "none", "GGUF rope scaling '{}' is not served", scaling);
  }
  // Llama 3.1's rope scaling travels as per-frequency divisors (the rope_freqs tensor convert_hf_to_gguf.py computes
  // from rope_scaling): radixserve's rope table divides by them (rope_parameters.freq_factors).
  if (const TensorRecord* freqs = weights.record("rope_freqs.weight")) {
    RS_CHECK(freqs->ne.size() == 1, "GGUF rope_freqs.weight is not 1-D");
    std::vector<float> factors(freqs->ne[0]);
    decode_f32(freqs->type, freqs->data, freqs->ne[0], factors.data());
    rope["freq_factors"] = factors;
  }
  config["rope_parameters"] = rope;

  const bool hybrid = arch == "qwen3next" || arch == "qwen35" || arch == "qwen35moe";
  if (hybrid) {
    // Gated delta nets (the ssm.* keys) on every layer but each full_attention_interval-th; partial RoPE over
    // rope.dimension_count of head_dim.
    config["linear_conv_kernel_dim"] = k.integer("ssm.conv_kernel");
    config["linear_key_head_dim"] = k.integer("ssm.state_size");
    config["linear_num_key_heads"] = k.integer("ssm.group_count");
    config["linear_num_value_heads"] = k.integer("ssm.time_step_rank");
    config["linear_value_head_dim"] = k.integer("ssm.inner_size") / k.integer("ssm.time_step_rank");
    config["full_attention_interval"] = k.integer_or("full_attention_interval", 4);
    const int64_t head_dim = config["head_dim"].get<int64_t>();
    const double partial = static_cast<double>(k.integer_or("rope.dimension_count", head_dim / 4)) / head_dim;
    config["partial_rotary_factor"] = partial;
    rope["partial_rotary_factor"] = partial;
    config["rope_parameters"] = rope;
  }
  if (arch == "qwen3moe" || (hybrid && k.has("expert_count"))) {
    if (hybrid) config["shared_expert_intermediate_size"] = k.integer_or("expert_shared_feed_forward_length", 0);
    config["num_experts"] = k.integer("expert_count");
    config["num_experts_per_tok"] = k.integer("expert_used_count");
    config["moe_intermediate_size"] = k.integer("expert_feed_forward_length");
    config["norm_topk_prob"] = true;  // llama.cpp's qwen3moe graph always renormalizes the top-k weights
    config["decoder_sparse_step"] = 1;
    json dense = json::array();
    for (int64_t layer = 0; layer < config["num_hidden_layers"].get<int64_t>(); ++layer)
      if (!weights.record("blk." + std::to_string(layer) + ".ffn_gate_inp.weight")) dense.push_back(layer);
    config["mlp_only_layers"] = dense;
  }
  if (arch == "gpt-oss") {
    config["num_local_experts"] = k.integer("expert_count");
    config["num_experts_per_tok"] = k.integer("expert_used_count");
    config["intermediate_size"] = k.integer_or("expert_feed_forward_length", k.integer("feed_forward_length"));
    config["attention_bias"] = true;
    config["swiglu_limit"] = 7.0;
    // Sliding-window attention on even layers, full on odd ones (llama.cpp's swa pattern 2, gpt-oss's layer_types).
    const int64_t window = k.integer("attention.sliding_window");
    config["sliding_window"] = window;
    json types = json::array();
    for (int64_t layer = 0; layer < config["num_hidden_layers"].get<int64_t>(); ++layer)
      types.push_back(layer % 2 == 0 ? "sliding_attention" : "full_attention");
    config["layer_types"] = types;
    // YaRN as gpt-oss's config.json gives it: beta 32 / 1, correction range not truncated.
    rope["beta_fast"] = k.number_or("rope.scaling.yarn_beta_fast", 32.0);
    rope["beta_slow"] = k.number_or("rope.scaling.yarn_beta_slow", 1.0);
    rope["truncate"] = false;
    config["rope_parameters"] = rope;
  }
  if (const auto bos = token_id(meta, "tokenizer.ggml.bos_token_id")) config["bos_token_id"] = *bos;
  if (const auto eos = token_id(meta, "tokenizer.ggml.eos_token_id")) config["eos_token_id"] = *eos;
  if (const auto pad = token_id(meta, "tokenizer.ggml.padding_token_id")) config["pad_token_id"] = *pad;
  return config;
}

json hf_generation_config(const json& metadata) {
  // llama.cpp ends generation at any end-of-generation token: eos, eot (Llama 3's <|eot_id|>, Qwen's <|im_end|>), eom.
  json eos = json::array();
  for (const char* key : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"})
    if (const auto id = token_id(metadata, key); id && std::find(eos.begin(), eos.end(), *id) == eos.end())
      eos.push_back(*id);
  json config = json::object();
  if (!eos.empty()) config["eos_token_id"] = eos;
  if (const auto bos = token_id(metadata, "tokenizer.ggml.bos_token_id")) config["bos_token_id"] = *bos;
  return config;
}

}  // namespace rs::loader::gguf
