// ModelConfig: the facts of a Hugging Face config.json (+ generation_config.json) that the engine needs, parsed once.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "loader/quantization.h"
#include "tensor/dtype.h"

namespace rs::loader {

struct RopeConfig {
  std::string type = "default";  // default | linear | llama3 | yarn
  double theta = 10000.0;
  double factor = 1.0;
  double low_freq_factor = 1.0;            // llama3
  double high_freq_factor = 4.0;           // llama3
  int64_t original_max_position = 0;       // llama3, yarn
  double beta_fast = 32.0;                 // yarn
  double beta_slow = 1.0;                  // yarn
  bool truncate = true;                    // yarn: floor/ceil of the correction range
  std::optional<double> attention_factor;  // yarn mscale override
  std::optional<double> mscale, mscale_all_dim;
  double partial_rotary_factor = 1.0;
  // Per-frequency divisors of inv_freq (GGUF's rope_freqs tensor, Llama 3.1's scaling as llama.cpp stores it), as
  // rope_parameters.freq_factors in a config.json radixserve makes of a GGUF file; empty: none.
  std::vector<float> freq_factors;
};

// What a layer mixes tokens with (config.json `layer_types`): softmax attention over a KV cache, or a gated delta net
// (linear attention) over a fixed-size recurrent state.
enum class LayerKind : uint8_t { kAttention, kLinearAttention };

// Gated-delta-net shapes (`linear_*` fields of Qwen3-Next / Qwen3.5, MODELS.md §1.6); zero for other models.
struct LinearAttentionConfig {
  int32_t num_key_heads = 0;    // linear_num_key_heads
  int32_t num_value_heads = 0;  // linear_num_value_heads (a multiple of num_key_heads)
  int32_t key_head_dim = 0;     // linear_key_head_dim
  int32_t value_head_dim = 0;   // linear_value_head_dim
  int32_t conv_kernel = 0;      // linear_conv_kernel_dim

  int32_t key_dim() const { return num_key_heads * key_head_dim; }
  int32_t value_dim() const { return num_value_heads * value_head_dim; }
  int32_t conv_channels() const { return 2 * key_dim() + value_dim(); }  // q | k | v
};

struct ModelConfig {
  std::string architecture;  // architectures[0], e.g. "Qwen3ForCausalLM"
  std::string model_type;
  int32_t hidden_size = 0;
  int32_t intermediate_size = 0;
  int32_t num_layers = 0;
  int32_t num_heads = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t vocab_size = 0;
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  bool tie_word_embeddings = false;
  bool attention_bias = false;
  RopeConfig rope;
  std::vector<int32_t> layer_windows;  // per layer: 0 = full attention, W = sliding window of W tokens
  std::vector<LayerKind> layer_kinds;  // per layer (layer_types, or full_attention_interval for hybrid models)
  LinearAttentionConfig linear;        // set when any layer is kLinearAttention
  bool attn_output_gate = false;       // hybrid Qwen: q_proj is doubled, per head [query | gate]
  // Where the text model's tensors live: "model." (…ForCausalLM) or "model.language_model." (the text part of a
  // …ForConditionalGeneration checkpoint, whose config sits under text_config).
  std::string weight_prefix = "model.";
  // Mixture of experts (0 experts = dense).
  int32_t num_experts = 0;
  int32_t num_experts_per_tok = 0;
  int32_t moe_intermediate_size = 0;
  bool norm_topk_prob = false;
  int32_t decoder_sparse_step = 1;
  std::vector<int32_t> mlp_only_layers;
  int32_t shared_expert_intermediate_size = 0;  // Qwen3-Next / Qwen3.5-MoE: a gated shared expert; 0 = none
  double swiglu_limit = 7.0;
  // EAGLE-3 draft heads (LlamaForCausalLMEagle3): logits over draft_vocab_size tokens (mapped to target ids by the
  // checkpoint's d2t table), fed by the target's residual stream at the entry of three target layers (entry L = the
  // exit of the last of L layers): eagle_config.eagle_aux_hidden_state_layer_ids + 1 where given, else
  // eagle_capture_layers(L) picks SGLang's 2, L/2, L-3. eagle_target_hidden: the target's hidden size.
  // eagle_lm_head: the head's own lm_head.weight; or, as SGLang decides, the target's embedding table
  // (tie_word_embeddings) or the target's LM head (config.json without draft_vocab_size, e.g. gpt-oss heads), both
  // over the whole vocabulary.
  enum class EagleLmHead { kOwn, kTargetEmbedding, kTargetHead };
  int32_t draft_vocab_size = 0;
  int32_t eagle_target_hidden = 0;
  std::vector<int32_t> eagle_layer_ids;
  EagleLmHead eagle_lm_head = EagleLmHead::kOwn;
  bool is_eagle3() const { return draft_vocab_size > 0; }
  // DFlash block-diffusion drafters (DFlashDraftModel, z-lab): a few Qwen3 layers that denoise a block of
  // `block_size` positions [last token, mask_token_id x (block_size - 1)] in one forward, conditioned on the target's
  // residual stream after `target_layer_ids` (taps at entries id + 1), projected by fc and hidden_norm; they read the
  // target's embedding table and LM head. `causal` per layer: config.json's is_causal where given, else only
  // sliding_attention layers are causal (as z-lab's model decides).
  struct DFlashConfig {
    int32_t block_size = 0;
    int32_t mask_token_id = -1;
    std::vector<int32_t> target_layer_ids;
    std::vector<bool> causal;  // per drafter layer
  };
  DFlashConfig dflash;
  bool is_dflash() const { return dflash.block_size > 0; }
  // A model that drafts for a target and reads its hidden states (EAGLE-3 heads, DFlash drafters).
  bool is_draft_head() const { return is_eagle3() || is_dflash(); }
  // The target layer entries a draft head reads (taps): EAGLE-3's eagle_capture_layers, DFlash's target_layer_ids + 1.
  std::vector<int32_t> draft_capture_layers(int32_t target_layers) const;
  // Embedding models. `embedding` (the engine sets it for --task embed, or when the checkpoint is one:
  // embedding_detected) makes the model return each pooled row's final-normed hidden state instead of logits.
  // Detected from a base-model architecture (Qwen3Model, LlamaModel) or a sentence-transformers folder (modules.json
  // with a Pooling module, as Qwen3-Embedding ships); the pooling it names ("last", "mean", "cls"), whether it
  // normalises (a Normalize module; true without modules.json), and the Matryoshka sizes the output may be cut to
  // (config.json's is_matryoshka / matryoshka_dimensions; empty with is_matryoshka: any size).
  bool embedding_detected = false;
  bool embedding = false;
  std::string embedding_pooling = "last";
  bool embedding_normalize = true;
  bool is_matryoshka = false;
  std::vector<int32_t> matryoshka_dimensions;
  int32_t logits_width() const { return embedding ? hidden_size : is_eagle3() ? draft_vocab_size : vocab_size; }
  std::vector<int32_t> eagle_capture_layers(int32_t target_layers) const;
  // Tokens.
  std::vector<int32_t> eos_token_ids;  // generation_config.json first, else config.json
  std::optional<int32_t> bos_token_id;
  std::optional<int32_t> pad_token_id;
  DType dtype = DType::kBF16;          // torch_dtype / dtype
  std::string quant_method;            // "" or e.g. "mxfp4"
  QuantizationConfig quantization;     // quantization_config, parsed (and --quantization, set by the engine)
  nlohmann::json raw;                  // the whole config.json, for architecture-specific fields
  nlohmann::json generation_defaults;  // generation_config.json (temperature, top_p, ...), or {}

  bool is_moe_layer(int32_t layer) const;
  bool is_hybrid() const { return linear.num_value_heads > 0; }
  int32_t num_layers_of(LayerKind kind) const;
};

// Reads dir/config.json and, if present, dir/generation_config.json. Errors name the file and the field.
ModelConfig load_model_config(const std::filesystem::path& model_dir);
// Parses an already-loaded config.json (text form errors name `source`).
ModelConfig parse_model_config(const nlohmann::json& config, const std::string& source);

}  // namespace rs::loader
