// Qwen3-MoE (Qwen3MoeForCausalLM): Qwen3 attention; sparse layers route with softmax over all experts, top-k,
// optional renormalisation; no shared expert. Layers in mlp_only_layers (or off the sparse step) stay dense.
#include "model/architectures.h"
#include "model/decoder.h"

namespace rs::model {
namespace {

class Qwen3MoeModel final : public DecoderModel {
 public:
  explicit Qwen3MoeModel(const loader::ModelConfig& config)
      : DecoderModel(config, DecoderOptions{.qk_norm = true, .routing = MoeRouting::kSoftmaxTopK}) {}

 protected:
  void load_ffn(int32_t layer, const std::string& prefix, loader::WeightSource& weights,
                FeedForwardWeights& ffn) override {
    if (!config_.is_moe_layer(layer)) return DecoderModel::load_ffn(layer, prefix, weights, ffn);
    const int64_t hidden = config_.hidden_size, inter = config_.moe_intermediate_size;
    const int32_t experts = config_.num_experts;
    ffn.is_moe = true;
    ffn.router = dense(weights, prefix + "mlp.gate.weight", experts, hidden, /*quantizable=*/false);
    ffn.experts.activation = MoeActivation::kSwiGlu;
    const ExpertRange local = local_experts(experts);
    ffn.experts.first_expert = local.first;
    ffn.experts.total_experts = experts;
    for (int32_t e = local.first; e < local.first + local.count; ++e) {
      const std::string mlp = prefix + "mlp.";
      ffn.experts.gate.push_back(expert(weights, mlp, e, experts, "gate_proj", inter, hidden));
      ffn.experts.up.push_back(expert(weights, mlp, e, experts, "up_proj", inter, hidden));
      ffn.experts.down.push_back(expert(weights, mlp, e, experts, "down_proj", hidden, inter));
    }
  }
};

}  // namespace

std::unique_ptr<Model> make_qwen3_moe(const loader::ModelConfig& config) {
  RS_CHECK(config.num_experts > 0 && config.moe_intermediate_size > 0,
           "Qwen3MoeForCausalLM needs num_experts and moe_intermediate_size in config.json");
  return std::make_unique<Qwen3MoeModel>(config);
}

}  // namespace rs::model
