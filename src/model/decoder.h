// DecoderModel: the decoder every supported architecture shares (MODELS.md §1.0): a list of layers, each a token mixer
// of its kind (attention over paged K/V, or a gated delta net over a recurrent-state slot) then an FFN (dense MLP or
// MoE, with an optional gated shared expert). Architecture files (llama.cpp, qwen3.cpp, qwen3_moe.cpp, gpt_oss.cpp,
// qwen3_next.cpp) choose its options and load the parts that differ.
#pragma once

#include <vector>

#include "backend/communicator.h"
#include "model/linear_loader.h"
#include "model/model.h"

namespace rs::model {

struct AttentionWeights {
  LinearWeight qkv, o;        // q_proj | k_proj | v_proj fused into one [(H + 2 KVH) * hd, hidden] weight
  LinearWeight gate;          // [H * hd, hidden] output gate rows of a doubled q_proj (hybrid Qwen), or empty
  Tensor qkv_bias, o_bias;    // empty without attention_bias
  Tensor q_norm, k_norm;      // [head_dim] per-head RMSNorm weights (Qwen3), or empty
  Tensor sinks;               // [num_heads] (gpt-oss), or empty
  Model::KvScales kv_scales;  // the checkpoint's FP8 KV cache scales, or {0, 0}
};

struct FeedForwardWeights {
  // Dense MLP: gate and up fused into one [2I, H] weight (gate rows first).
  LinearWeight gate_up, down;
  // Mixture of experts.
  bool is_moe = false;
  LinearWeight router;  // [E, H]
  Tensor router_bias;   // [E] or empty
  MoeWeights experts;
  // Shared expert (Qwen3-Next, Qwen3.5-MoE): a dense SwiGLU MLP scaled by sigmoid(shared_gate . h); empty if none.
  LinearWeight shared_gate_up, shared_down, shared_gate;  // [2 Is, H], [H, Is], [1, H]
};

// A gated delta net (MODELS.md §1.6), its input projections reordered at load into one layout for every release.
struct GatedDeltaNetWeights {
  LinearWeight in_qkv;    // [2 key_dim + value_dim, H]: q | k | v (the conv channels)
  LinearWeight in_z;      // [value_dim, H], value head after value head
  LinearWeight in_ba;     // [2 nv, H]: b of every value head, then a
  LinearWeight out;       // [H, value_dim]
  Tensor conv_weight;     // f32 [conv channels, kernel]
  Tensor a_log, dt_bias;  // f32 [nv]
  Tensor norm;            // [dv] gated RMSNorm weight (plain, not 1 + w)
};

struct LayerWeights {
  loader::LayerKind kind = loader::LayerKind::kAttention;
  Tensor input_norm, post_attention_norm;  // [H]
  AttentionWeights attention;              // kind == kAttention
  GatedDeltaNetWeights gdn;                // kind == kLinearAttention
  FeedForwardWeights ffn;
};

struct DecoderOptions {
  bool qk_norm = false;  // Qwen3: RMSNorm per head on q and k before RoPE
  bool sinks = false;    // gpt-oss: learned per-head sink logits
  MoeRouting routing = MoeRouting::kSoftmaxTopK;
  bool zero_centered_norm = false;  // every RMSNorm scales by (1 + w) (Qwen3-Next, Qwen3.5): applied at load
};

class DecoderModel : public Model {
 public:
  DecoderModel(const loader::ModelConfig& config, DecoderOptions options);

  void load(loader::WeightSource& weights, Backend& backend, const ProgressFn& progress) override;
  void reserve(int64_t max_tokens) override { ensure_workspace(max_tokens); }
  void forward(const StepInputs& inputs, StepMemory& memory, Tensor logits) override;
  Tensor embedding_table() const override { return embed_tokens_; }
  const LinearWeight* output_head() const override { return &lm_head_; }
  std::vector<KvScales> kv_cache_scales() const override;
  // Tensor parallelism (model/tensor_parallel.h): this model is rank comm->rank() of a group, built from the rank's
  // config (its share of the heads and of the MLP width) and loaded from WeightSource::sharded. After the token
  // mixer and after the feed-forward block the ranks' partial outputs are summed (comm->all_reduce_sum); the LM head
  // holds the rank's block of the vocabulary and rank 0 gathers the logits. Set before load().
  // expert_parallel: MoE layers hold whole experts, a block of them per rank (local_experts), instead of a share of
  // every expert's width.
  void set_communicator(Communicator* comm, bool expert_parallel = false) {
    comm_ = comm;
    expert_parallel_ = expert_parallel;
  }

 protected:
  // The experts of `count` this model holds: all, or with expert parallelism the rank's block. MoE loaders load
  // these (expert() takes global indices) and record them in MoeWeights::first_expert / total_experts.
  struct ExpertRange {
    int32_t first = 0, count = 0;
  };
  ExpertRange local_experts(int32_t count) const;
  // Loads the feed-forward block of `layer` (prefix "{weight_prefix}layers.{layer}."). The default is the dense SiLU
  // MLP of intermediate_size.
  virtual void load_ffn(int32_t layer, const std::string& prefix, loader::WeightSource& weights,
                        FeedForwardWeights& ffn);
  // Helpers for architecture files.
  // The linear `name` ("...q_proj.weight") in whatever format the checkpoint stores it (see LinearLoader);
  // `quantizable`: whether --quantization may quantize it (false for routers and one-row gates).
  LinearWeight dense(loader::WeightSource& weights, const std::string& name, int64_t out, int64_t in,
                     bool quantizable = true);
  // Projection `proj` ("gate_proj") of expert `e` of `count` in the MoE block at `mlp` ("...mlp."): per-expert modules
  // (mlp.experts.{e}.gate_proj, Hugging Face) or one stacked module (mlp.switch_mlp.gate_proj, mlx_lm).
  LinearWeight expert(loader::WeightSource& weights, const std::string& mlp, int64_t e, int64_t count,
                      const std::string& proj, int64_t out, int64_t in);
  // Stacks the rows of weights of one format into a new [sum rows, in] weight (owned here), already prepared for the
  // backend (a repacking backend keeps only its packed copy of a dense weight).
  LinearWeight concat(std::initializer_list<LinearWeight> parts);
  LinearWeight concat(std::span<const LinearWeight> parts);
  // concat() of dense [rows_i, in] tensors.
  LinearWeight concat_rows(std::initializer_list<Tensor> parts);
  LinearLoader& linears(loader::WeightSource& weights);
  bool norms_stored_shifted_ = false;  // (1 + w) norms stored with the 1 added (mlx_lm's Qwen3-Next/3.5 layout)
  // Frees owned_ buffers that only `garbage` (weights consumed by a fusion or row selection) or buffers made at or
  // after index `from` reference, keeping every buffer `kept` reads.
  void release_unused(size_t from, std::span<const LinearWeight> garbage, const LinearWeight& kept);
  // Stores a host buffer for the model's lifetime and returns a view of it.
  Tensor keep(Buffer buffer, DType dtype, std::vector<int64_t> shape);
  // A host f32 copy of `t` (any float dtype), owned here, plus `offset` on every element.
  Tensor to_f32(const Tensor& t, float offset = 0.0f);
  // An RMSNorm weight, as (1 + w) in f32 when options_.zero_centered_norm.
  Tensor norm_weight(loader::WeightSource& weights, const std::string& name, int64_t width);

  const loader::ModelConfig config_;
  const DecoderOptions options_;
  Backend* backend_ = nullptr;
  std::vector<Buffer> owned_;  // concatenated / transposed / uploaded weights
  std::unique_ptr<LinearLoader> linear_loader_;
  const loader::WeightSource* linear_source_ = nullptr;

 private:
  void load_attention(const std::string& prefix, loader::WeightSource& weights, AttentionWeights& attn);
  // The checkpoint's FP8 KV cache scale of side 'k' or 'v' of the attention layer under attn_prefix, or 0.
  static float kv_scale(loader::WeightSource& weights, const std::string& attn_prefix, char side);
  // gated_delta_net.cpp: loads Qwen3-Next's fused (in_proj_qkvz, in_proj_ba) or Qwen3.5's split projections.
  void load_gated_delta_net(const std::string& prefix, loader::WeightSource& weights, GatedDeltaNetWeights& gdn);
  void upload_layer(LayerWeights& layer, std::vector<Buffer>& keep_alive);
  void ensure_workspace(int64_t tokens);
  // h [T, H] (normed layer input, f32 or bf16) -> out [T, H] f32.
  void run_attention(int32_t layer, const StepInputs& inputs, memory::KvPool& kv, const Tensor& h, Tensor out);
  // gated_delta_net.cpp: h [T, H] -> out [T, H] through the layer's recurrent state.
  void run_gated_delta_net(int32_t layer, const StepInputs& inputs, memory::StatePool& state, Tensor out);
  void run_ffn(const FeedForwardWeights& ffn, const Tensor& h, Tensor out);

  // Writes x (the residual stream) into the feature cache's column blocks of the captures at `layer`.
  void capture(int32_t layer, const Tensor& x, const StepInputs& inputs);

  Tensor embed_tokens_, final_norm_;  // embed_tokens_ empty where the checkpoint quantizes the table:
  LinearWeight embed_codes_;          // then its codes (kAffine), looked up by Backend::embedding_affine
  LinearWeight lm_head_;
  std::vector<LayerWeights> layers_;
  Tensor rope_table_;  // [positions, rotary_dim] on device
  int32_t rotary_dim_ = 0;
  // Whether every consumer of the normed layer inputs and SwiGLU outputs (resp. of the final norm) is a linear with a
  // dense bf16 weight, so that they may take Backend::linear_input_dtype: dense attention models (no MoE, gated
  // attention or delta nets, whose routers, gates and kernels read f32).
  bool typed_layer_inputs_ = false;
  bool typed_head_input_ = false;
  Communicator* comm_ = nullptr;  // tensor parallelism: the rank's group, or null
  bool expert_parallel_ = false;
  int64_t head_rows() const;  // LM head rows: the vocabulary, or the rank's block of it
  Buffer head_buffer_;        // tensor parallelism: the rank's logits before the gather
  // Activations, sized for the largest step seen.
  int64_t workspace_tokens_ = 0;
  Buffer workspace_;
  Tensor x_, h_, qkv_, q_, attn_, proj_, gate_up_, act_, router_logits_, topk_ids_, topk_weights_;
  Tensor attn_gate_, shared_, shared_gate_;                  // gated attention, shared expert
  Tensor gdn_mixed_, gdn_conv_, gdn_z_, gdn_ba_, gdn_core_;  // gated delta net
};

}  // namespace rs::model
