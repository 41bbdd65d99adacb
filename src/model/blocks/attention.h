// Attention over the paged K/V cache (MODELS.md §1.1-1.5): fused q|k|v projection (with biases: gpt-oss), per-head
// QK RMSNorm (Qwen3), RoPE (partial for the hybrid Qwens), per-layer sliding window and sinks (gpt-oss), an output
// gate from a doubled q_proj (hybrid Qwens), o_proj.
#pragma once

#include <memory>
#include <string>

#include "model/blocks/block.h"
#include "model/weight_builder.h"

namespace rs::model {

// The rotary table every attention layer of a model shares: f32 [positions, rotary_dim] (cos | sin halves).
struct RopeTable {
  Tensor table;
  int32_t rotary_dim = 0;
};

struct AttentionOptions {
  bool qk_norm = false;  // Qwen3: RMSNorm per head on q and k before RoPE
  bool sinks = false;    // gpt-oss: learned per-head sink logits
  bool causal = true;    // false: every query sees its sequence's keys up to the step's last (DFlash's block)
};

class Attention final : public TokenMixer {
 public:
  // The attention of layer `layer` under `prefix` ("model.layers.3."). `rope` is the model's, filled before a step.
  static std::unique_ptr<Attention> load(WeightBuilder& build, const loader::ModelConfig& config,
                                         const std::string& prefix, int32_t layer, AttentionOptions options,
                                         const RopeTable& rope);

  // An attention whose q|k|v come from elsewhere (run_projected): only o_proj loads (an EAGLE-3 head projects q|k|v
  // from two inputs). Options and gate: none.
  static std::unique_ptr<Attention> load_projected(WeightBuilder& build, const loader::ModelConfig& config,
                                                   const std::string& prefix, int32_t layer, const RopeTable& rope);

  void visit(WeightVisitor& visitor) override;
  ScratchNeed scratch_need() const override;
  bool takes_typed_input() const override { return gate_.out_features == 0 && is_dense_bf16(qkv_); }
  Model::KvScales kv_scales() const override { return kv_scales_; }
  void run(const LayerStep& step, const Tensor& h, Tensor out) override;
  // Attention of q|k|v already projected ([T, (H + 2 KVH) hd] f32) -> out [T, H] f32.
  void run_projected(const LayerStep& step, const Tensor& qkv, Tensor out);

 private:
  explicit Attention(const RopeTable& rope) : rope_(rope) {}
  void set_shape(const loader::ModelConfig& config, int32_t layer, Tensor sinks);
  // q|k|v -> attn [T, H hd]: QK norm, RoPE, K/V into the cache, attention.
  void attend(const LayerStep& step, const Tensor& qkv, Tensor attn);
  // The checkpoint's FP8 KV cache scale of side 'k' or 'v' of the attention under attn_prefix, or 0.
  static float kv_scale(loader::WeightSource& weights, const std::string& attn_prefix, char side);

  const RopeTable& rope_;
  AttentionParams params_;
  float eps_ = 0.0f;
  LinearWeight qkv_, o_;      // q_proj | k_proj | v_proj fused into one [(H + 2 KVH) * hd, hidden] weight
  LinearWeight gate_;         // [H * hd, hidden] output gate rows of a doubled q_proj (hybrid Qwen), or empty
  Tensor qkv_bias_, o_bias_;  // empty without attention_bias
  Tensor q_norm_, k_norm_;    // [head_dim] per-head RMSNorm weights (Qwen3), or empty
  Model::KvScales kv_scales_;
};

}  // namespace rs::model
