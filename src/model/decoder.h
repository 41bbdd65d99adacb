// DecoderModel: the Llama-template decoder every supported architecture shares (MODELS.md §1.0). Architecture files
// (llama.cpp, qwen3.cpp, qwen3_moe.cpp, gpt_oss.cpp) choose its options and load the parts that differ.
#pragma once

#include <vector>

#include "model/model.h"

namespace rs::model {

struct AttentionWeights {
  LinearWeight qkv, o;      // q_proj | k_proj | v_proj fused into one [(H + 2 KVH) * hd, hidden] weight
  Tensor qkv_bias, o_bias;  // empty without attention_bias
  Tensor q_norm, k_norm;    // [head_dim] per-head RMSNorm weights (Qwen3), or empty
  Tensor sinks;             // [num_heads] (gpt-oss), or empty
};

struct FeedForwardWeights {
  // Dense MLP: gate and up fused into one [2I, H] weight (gate rows first).
  LinearWeight gate_up, down;
  // Mixture of experts.
  bool is_moe = false;
  LinearWeight router;  // [E, H]
  Tensor router_bias;   // [E] or empty
  MoeWeights experts;
};

struct LayerWeights {
  Tensor input_norm, post_attention_norm;  // [H]
  AttentionWeights attention;
  FeedForwardWeights ffn;
};

struct DecoderOptions {
  bool qk_norm = false;  // Qwen3: RMSNorm per head on q and k before RoPE
  bool sinks = false;    // gpt-oss: learned per-head sink logits
  MoeRouting routing = MoeRouting::kSoftmaxTopK;
};

class DecoderModel : public Model {
 public:
  DecoderModel(const loader::ModelConfig& config, DecoderOptions options);

  void load(loader::WeightSource& weights, Backend& backend, const ProgressFn& progress) override;
  void reserve(int64_t max_tokens) override { ensure_workspace(max_tokens); }
  void forward(const StepInputs& inputs, kv::KvPool& kv, Tensor logits) override;

 protected:
  // Loads the feed-forward block of `layer` (prefix "model.layers.{layer}."). The default is the dense SiLU MLP.
  virtual void load_ffn(int32_t layer, const std::string& prefix, loader::WeightSource& weights,
                        FeedForwardWeights& ffn);
  // Helpers for architecture files.
  LinearWeight dense(loader::WeightSource& weights, const std::string& name, int64_t out, int64_t in);
  // Concatenates [rows_i, in] weights of one dtype into a new [sum rows_i, in] weight (owned here), already prepared
  // for the backend (a repacking backend keeps only its packed copy).
  LinearWeight concat_rows(std::initializer_list<Tensor> parts);
  // Stores a host buffer for the model's lifetime and returns a view of it.
  Tensor keep(Buffer buffer, DType dtype, std::vector<int64_t> shape);

  const loader::ModelConfig config_;
  const DecoderOptions options_;
  Backend* backend_ = nullptr;

 private:
  void load_attention(const std::string& prefix, loader::WeightSource& weights, AttentionWeights& attn);
  void ensure_workspace(int64_t tokens);
  // x += ffn(norm(x)); scratch [T, hidden] is free for the op's temporaries.
  void run_ffn(const FeedForwardWeights& ffn, const InputNorm& norm, Tensor x, Tensor scratch);

  Tensor embed_tokens_, final_norm_;
  LinearWeight lm_head_;
  std::vector<LayerWeights> layers_;
  Tensor rope_table_;  // [positions, rotary_dim] on device
  int32_t rotary_dim_ = 0;
  std::vector<Buffer> owned_;  // concatenated / transposed / uploaded weights
  // Activations, sized for the largest step seen.
  int64_t workspace_tokens_ = 0;
  Buffer workspace_;
  Tensor x_, h_, qkv_, q_, attn_, proj_, gate_up_, act_, router_logits_, topk_ids_, topk_weights_;
};

}  // namespace rs::model
