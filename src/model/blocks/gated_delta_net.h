// The gated delta net (linear attention) of the hybrid Qwen models (MODELS.md §1.6): both releases' projection layouts
// loaded into one, run through the Backend's conv / delta-rule / gated-norm ops over the layer's recurrent-state slot.
#pragma once

#include <memory>
#include <string>

#include "model/blocks/block.h"
#include "model/weight_builder.h"

namespace rs::model {

class GatedDeltaNet final : public TokenMixer {
 public:
  // The layer under `prefix` ("model.layers.0."): Qwen3-Next's fused (in_proj_qkvz, in_proj_ba) or Qwen3.5's split
  // projections.
  static std::unique_ptr<GatedDeltaNet> load(WeightBuilder& build, const loader::ModelConfig& config,
                                             const std::string& prefix);

  void visit(WeightVisitor& visitor) override;
  ScratchNeed scratch_need() const override;
  bool takes_typed_input() const override { return false; }  // the conv and the delta rule read f32
  void run(const LayerStep& step, const Tensor& h, Tensor out) override;

 private:
  GatedDeltaNet(const loader::LinearAttentionConfig& shape, float eps) : shape_(shape), eps_(eps) {}

  const loader::LinearAttentionConfig shape_;
  const float eps_;
  LinearWeight in_qkv_;     // [2 key_dim + value_dim, H]: q | k | v (the conv channels)
  LinearWeight in_z_;       // [value_dim, H], value head after value head
  LinearWeight in_ba_;      // [2 nv, H]: b of every value head, then a
  LinearWeight out_;        // [H, value_dim]
  Tensor conv_weight_;      // f32 [conv channels, kernel]
  Tensor a_log_, dt_bias_;  // f32 [nv]
  Tensor norm_;             // [dv] gated RMSNorm weight (plain, not 1 + w)
};

}  // namespace rs::model
