#include "loader/dummy_layout.h"

namespace rs::loader {

std::vector<std::string> dummy_layout(const ModelConfig& config) {
  std::vector<std::string> layout;
  // Qwen3-Next ships its gated-delta-net input projections fused per key head (in_proj_qkvz, in_proj_ba); Qwen3.5
  // splits them.
  if (config.model_type == "qwen3_next") layout.push_back(".linear_attn.in_proj_qkvz.weight");
  // gpt-oss as released: MXFP4 expert blocks and scales (a bf16 conversion stores gate_up_proj / down_proj).
  if (config.quant_method == "mxfp4") layout.push_back(".experts.gate_up_proj_blocks");
  // Qwen3.5-MoE: every expert's gate_up stacked in one [E, 2I, H] tensor (Qwen3-MoE: one module per expert).
  if (config.model_type.rfind("qwen3_5_moe", 0) == 0) layout.push_back(".mlp.experts.gate_up_proj");
  return layout;
}

}  // namespace rs::loader
