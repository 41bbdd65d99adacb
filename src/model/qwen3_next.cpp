// The hybrid Qwen family (MODELS.md §1.6): Qwen3-Next (Qwen3NextForCausalLM), Qwen3.5 dense (Qwen3_5ForCausalLM) and
// Qwen3.5-MoE (Qwen3_5MoeForCausalLM), and the text part of their *ForConditionalGeneration checkpoints. Gated
// delta-net layers interleaved with gated full attention (doubled q_proj, QK-norm, partial RoPE); zero-centred
// (1 + w) RMSNorms; MoE layers with a sigmoid-gated shared expert, experts stored per expert or fused.
#include "model/architectures.h"
#include "model/blocks/feed_forward.h"
#include "model/decoder.h"

namespace rs::model {
namespace {

class HybridQwenModel final : public DecoderModel {
 public:
  explicit HybridQwenModel(const loader::ModelConfig& config)
      : DecoderModel(config, DecoderOptions{.attention = {.qk_norm = true}, .zero_centered_norm = true}) {}

 protected:
  std::unique_ptr<FeedForward> load_ffn(int32_t layer, const std::string& prefix, WeightBuilder& build) override {
    if (!config_.is_moe_layer(layer)) return DecoderModel::load_ffn(layer, prefix, build);
    const int64_t hidden = config_.hidden_size, inter = config_.moe_intermediate_size;
    const int32_t count = config_.num_experts;
    const std::string p = prefix + "mlp.";
    LinearWeight router = build.dense(p + "gate.weight", count, hidden, /*quantizable=*/false);
    MoeWeights experts = load_swiglu_experts(build, p, count, hidden, inter);  // per expert, stacked or fused
    const MoeOptions options{MoeRouting::kSoftmaxTopK, config_.norm_topk_prob, config_.num_experts_per_tok};
    const int64_t shared = config_.shared_expert_intermediate_size;
    std::unique_ptr<DenseMlp> shared_mlp;
    LinearWeight shared_gate;
    if (shared > 0) {
      shared_mlp = DenseMlp::load(build, p + "shared_expert.", hidden, shared);
      shared_gate = build.dense(p + "shared_expert_gate.weight", 1, hidden, /*quantizable=*/false);
    }
    return std::make_unique<MixtureOfExperts>(std::move(router), Tensor(), std::move(experts), options,
                                              std::move(shared_mlp), std::move(shared_gate));
  }
};

}  // namespace

std::unique_ptr<Model> make_qwen3_next(const loader::ModelConfig& config) {
  RS_CHECK(config.attn_output_gate, "{}: expected a hybrid Qwen config (model_type qwen3_next or qwen3_5*), got '{}'",
           config.architecture, config.model_type);
  const bool moe = config.architecture.find("Moe") != std::string::npos || config.model_type == "qwen3_next";
  if (moe)
    RS_CHECK(config.num_experts > 0 && config.moe_intermediate_size > 0 && config.num_experts_per_tok > 0,
             "{} needs num_experts, num_experts_per_tok and moe_intermediate_size in config.json", config.architecture);
  return std::make_unique<HybridQwenModel>(config);
}

}  // namespace rs::model
