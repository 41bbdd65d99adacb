// DecoderModel: the decoder every supported architecture shares (MODELS.md §1.0): the embedding, a list of layers, each
// a token mixer block of the config's layer kind (blocks/attention.h or blocks/gated_delta_net.h) then a feed-forward
// block (blocks/feed_forward.h), and the final norm and LM head. Architecture files (llama.cpp, qwen3.cpp,
// qwen3_moe.cpp, gpt_oss.cpp, qwen3_next.cpp) choose its options and load the feed-forward blocks that differ.
#pragma once

#include <vector>

#include "backend/communicator.h"
#include "model/blocks/attention.h"
#include "model/blocks/block.h"
#include "model/model.h"
#include "model/weight_builder.h"

namespace rs::model {

// One decoder layer: x += mixer(norm(x)); x += ffn(norm(x)).
struct DecoderLayer {
  Tensor input_norm, post_attention_norm;  // [H]
  std::unique_ptr<TokenMixer> mixer;       // attention or a gated delta net, by config.layer_kinds
  std::unique_ptr<FeedForward> ffn;        // dense MLP or mixture of experts, by the architecture (load_ffn)
};

struct DecoderOptions {
  AttentionOptions attention;
  bool zero_centered_norm = false;  // every RMSNorm scales by (1 + w) (Qwen3-Next, Qwen3.5): applied at load
};

class DecoderModel : public Model {
 public:
  DecoderModel(const loader::ModelConfig& config, DecoderOptions options);

  void load(loader::WeightSource& weights, Backend& backend, const ProgressFn& progress) override;
  void reserve(int64_t max_tokens) override { ensure_workspace(max_tokens); }
  void forward(const StepInputs& inputs, StepMemory& memory, Tensor logits) override;
  SharedWeights shared_weights() const override { return {embed_tokens_, &lm_head_}; }
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
  // The feed-forward block of `layer` (prefix "{weight_prefix}layers.{layer}."). The default is the dense SiLU MLP of
  // intermediate_size.
  virtual std::unique_ptr<FeedForward> load_ffn(int32_t layer, const std::string& prefix, WeightBuilder& build);

  const loader::ModelConfig config_;
  const DecoderOptions options_;
  Backend* backend_ = nullptr;
  std::vector<Buffer> owned_;     // concatenated / transposed / uploaded weights
  Communicator* comm_ = nullptr;  // tensor parallelism: the rank's group, or null
  bool expert_parallel_ = false;

 private:
  // Uploads every weight to a device backend and lets the backend prepare (repack) the projections.
  void upload_and_prepare(Backend& backend, bool shared_table);
  void ensure_workspace(int64_t tokens);

  // Writes x (the residual stream) into the feature cache's column blocks of the captures at `layer`.
  void capture(int32_t layer, const Tensor& x, const StepInputs& inputs);

  Tensor embed_tokens_, final_norm_;  // embed_tokens_ empty where the checkpoint quantizes the table:
  LinearWeight embed_codes_;          // then its codes (kAffine), looked up by Backend::embedding_affine
  LinearWeight lm_head_;
  std::vector<DecoderLayer> layers_;
  RopeTable rope_;  // [positions, rotary_dim] on the device, shared by every attention layer
  // Whether every consumer of the normed layer inputs and SwiGLU outputs (resp. of the final norm) is a linear with a
  // dense bf16 weight, so that they may take Backend::linear_input_dtype: dense attention models (no MoE, gated
  // attention or delta nets, whose routers, gates and kernels read f32).
  bool typed_layer_inputs_ = false;
  bool typed_head_input_ = false;
  int64_t head_rows() const;  // LM head rows: the vocabulary, or the rank's block of it
  Buffer head_buffer_;        // tensor parallelism: the rank's logits before the gather
  // Activations, sized for the largest step seen: the residual stream, the normed input and a block's output, then
  // the scratch the largest block needs (blocks run one after another and reuse it).
  int64_t workspace_tokens_ = 0;
  Buffer workspace_;
  Tensor x_, h_, proj_;
  size_t scratch_offset_ = 0, scratch_bytes_ = 0;
};

}  // namespace rs::model
