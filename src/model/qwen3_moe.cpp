// Qwen3-MoE (Qwen3MoeForCausalLM): Qwen3 attention; sparse layers route with softmax over all experts, top-k,
// optional renormalisation; no shared expert. Layers in mlp_only_layers (or off the sparse step) stay dense.
#include "model/architectures.h"
#include "model/blocks/feed_forward.h"
#include "model/decoder.h"

namespace rs::model {
namespace {

class Qwen3MoeModel final : public DecoderModel {
 public:
  explicit Qwen3MoeModel(const loader::ModelConfig& config)
      : DecoderModel(config, DecoderOptions{.attention = {.qk_norm = true}}) {}

 protected:
  std::unique_ptr<FeedForward> load_ffn(int32_t layer, const std::string& prefix, WeightBuilder& build) override {
    if (!config_.is_moe_layer(layer)) return DecoderModel::load_ffn(layer, prefix, build);
    const int64_t hidden = config_.hidden_size, inter = config_.moe_intermediate_size;
    const int32_t count = config_.num_experts;
    const std::string mlp = prefix + "mlp.";
    LinearWeight router = build.dense(mlp + "gate.weight", count, hidden, /*quantizable=*/false);
    MoeWeights experts = load_swiglu_experts(build, mlp, count, hidden, inter);
    const MoeOptions options{MoeRouting::kSoftmaxTopK, config_.norm_topk_prob, config_.num_experts_per_tok};
    return std::make_unique<MixtureOfExperts>(std::move(router), Tensor(), std::move(experts), options);
  }
};

}  // namespace

std::unique_ptr<Model> make_qwen3_moe(const loader::ModelConfig& config) {
  RS_CHECK(config.num_experts > 0 && config.moe_intermediate_size > 0,
           "Qwen3MoeForCausalLM needs num_experts and moe_intermediate_size in config.json");
  return std::make_unique<Qwen3MoeModel>(config);
}

}  // namespace rs::model
