// RoPE tables: inverse frequencies (default, linear, llama3, YaRN) and the per-position cos|sin table the kernels read.
#pragma once

#include <cstdint>
#include <vector>

#include "loader/hf_config.h"

namespace rs::model {

// Inverse frequencies for the rotary dims (size rotary_dim / 2), computed in fp32 as transformers does.
std::vector<float> rope_inv_freq(const loader::RopeConfig& rope, int32_t rotary_dim);
// Multiplier on cos and sin (YaRN's mscale; 1 otherwise).
float rope_attention_scaling(const loader::RopeConfig& rope);
// [num_positions, rotary_dim] f32: cos of the d/2 angles, then their sin, both times the attention scaling.
std::vector<float> rope_cos_sin_table(const loader::RopeConfig& rope, int32_t rotary_dim, int64_t num_positions);

}  // namespace rs::model
