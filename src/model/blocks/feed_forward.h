// Feed-forward blocks: the dense SwiGLU MLP (gate and up fused into one projection) and the mixture of experts
// (router, per-token top-k experts through Backend::moe, and an optional sigmoid-gated shared expert: Qwen3-Next,
// Qwen3.5-MoE). Architectures load their experts' layouts into MoeWeights and build a MixtureOfExperts from them.
#pragma once

#include <memory>
#include <string>

#include "model/blocks/block.h"
#include "model/weight_builder.h"

namespace rs::model {

class DenseMlp final : public FeedForward {
 public:
  // gate_proj, up_proj and down_proj under `mlp` ("model.layers.0.mlp."), of width `inter`.
  static std::unique_ptr<DenseMlp> load(WeightBuilder& build, const std::string& mlp, int64_t hidden, int64_t inter);

  void visit(WeightVisitor& visitor) override;
  ScratchNeed scratch_need() const override { return {3 * down_.in_features, 2}; }
  bool takes_typed_input() const override { return is_dense_bf16(gate_up_) && is_dense_bf16(down_); }
  void run(const LayerStep& step, const Tensor& h, Tensor out) override;

 private:
  LinearWeight gate_up_;  // [2I, H], gate rows first
  LinearWeight down_;     // [H, I]
};

// SwiGLU experts of `count` under `mlp` ("model.layers.0.mlp."), stored per expert or as one stacked module
// (WeightBuilder::expert), or fused as Qwen3.5-MoE releases them (experts.gate_up_proj [E, 2I, H], gate rows first,
// and experts.down_proj [E, H, I], viewed in place): all of them, or with expert parallelism the rank's block.
MoeWeights load_swiglu_experts(WeightBuilder& build, const std::string& mlp, int32_t count, int64_t hidden,
                               int64_t inter);

struct MoeOptions {
  MoeRouting routing = MoeRouting::kSoftmaxTopK;
  bool norm_topk_prob = true;
  int32_t experts_per_token = 0;
};

class MixtureOfExperts final : public FeedForward {
 public:
  // `router` [E, H] (and its bias [E], or empty) picks options.experts_per_token of `experts` per token; `shared`
  // (or null) is a shared expert whose output is scaled by sigmoid(shared_gate . h) ([1, H]) and added.
  MixtureOfExperts(LinearWeight router, Tensor router_bias, MoeWeights experts, MoeOptions options,
                   std::unique_ptr<DenseMlp> shared = nullptr, LinearWeight shared_gate = {});

  void visit(WeightVisitor& visitor) override;
  ScratchNeed scratch_need() const override;
  bool takes_typed_input() const override { return false; }  // the router reads f32
  void run(const LayerStep& step, const Tensor& h, Tensor out) override;

 private:
  LinearWeight router_;
  Tensor router_bias_;
  MoeWeights experts_;
  MoeOptions options_;
  std::unique_ptr<DenseMlp> shared_;
  LinearWeight shared_gate_;
};

}  // namespace rs::model
