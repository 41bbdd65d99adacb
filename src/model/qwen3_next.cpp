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
    loader::WeightSource& weights = build.source();
    const int64_t hidden = config_.hidden_size, inter = config_.moe_intermediate_size;
    const int32_t count = config_.num_experts;
    const std::string p = prefix + "mlp.";
    LinearWeight router = build.dense(p + "gate.weight", count, hidden, /*quantizable=*/false);
    MoeWeights experts;
    experts.activation = MoeActivation::kSwiGlu;
    const WeightBuilder::ExpertRange local = build.local_experts(count);
    experts.first_expert = local.first;
    experts.total_experts = count;
    const bool fused = weights.contains(p + "experts.gate_up_proj");
    if (fused) {
      // Qwen3.5-MoE releases: gate_up_proj [E, 2I, H] (gate rows first) and down_proj [E, H, I] (expert parallelism:
      // the rank's block of experts).
      const Tensor gate_up = weights.require(p + "experts.gate_up_proj", {local.count, 2 * inter, hidden});
      const Tensor down = weights.require(p + "experts.down_proj", {local.count, hidden, inter});
      const auto rows_of = [](const Tensor& t, int64_t first_element, int64_t rows, int64_t cols) {
        char* base = static_cast<char*>(t.data()) + first_element * dtype_size(t.dtype());
        return LinearWeight{LinearWeight::Format::kDense, Tensor(base, t.dtype(), {rows, cols}), Tensor(), rows, cols};
      };
      for (int64_t e = 0; e < local.count; ++e) {
        experts.gate.push_back(rows_of(gate_up, e * 2 * inter * hidden, inter, hidden));
        experts.up.push_back(rows_of(gate_up, (e * 2 + 1) * inter * hidden, inter, hidden));
        experts.down.push_back(rows_of(down, e * hidden * inter, hidden, inter));
      }
    } else {
      for (int32_t e = local.first; e < local.first + local.count; ++e) {
        experts.gate.push_back(build.expert(p, e, count, "gate_proj", inter, hidden));
        experts.up.push_back(build.expert(p, e, count, "up_proj", inter, hidden));
        experts.down.push_back(build.expert(p, e, count, "down_proj", hidden, inter));
      }
    }
    const MoeOptions options{MoeRouting::kSoftmaxTopK, config_.norm_topk_prob, config_.num_experts_per_tok};
    const int64_t shared = config_.shared_expert_intermediate_size;
    if (shared == 0)
      return std::make_unique<MixtureOfExperts>(std::move(router), Tensor(), std::move(experts), options);
    return std::make_unique<MixtureOfExperts>(
        std::move(router), Tensor(), std::move(experts), options,
        DenseMlp::load(build, p + "shared_expert.", hidden, shared),
        build.dense(p + "shared_expert_gate.weight", 1, hidden, /*quantizable=*/false));
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
