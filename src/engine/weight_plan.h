// What a model's weights will take before any is loaded, so that a model that cannot fit is refused in seconds with
// the numbers instead of running out of memory (or paging for minutes) halfway through loading (issue 42 item 1).
#pragma once

#include <cstddef>
#include <filesystem>

#include "loader/hf_config.h"

namespace rs::engine {

// A lower bound on the bytes the loaded weights take: a checkpoint's tensor files as stored (safetensors, GGUF,
// PyTorch .bin; formats widened at load only grow), or, for dummy weights, the parameters config.json describes at
// their narrowest stored width (quantized linears at their bits, gpt-oss's MXFP4 experts at 4.25 bits).
size_t planned_weight_bytes(const std::filesystem::path& model_dir, const loader::ModelConfig& config, bool dummy);

// The parameter count config.json describes: embeddings, LM head, attention or gated-delta-net mixers, dense or MoE
// feed-forwards with their shared experts (norms, biases and convolutions included).
struct ParameterCount {
  double linear = 0;   // projections a quantized format stores narrowly (q/k/v/o, gate/up/down, LM head)
  double experts = 0;  // MoE expert projections (gpt-oss stores them in MXFP4)
  double other = 0;    // embeddings, norms, routers, convolutions
  double total() const { return linear + experts + other; }
};
ParameterCount count_parameters(const loader::ModelConfig& config);

}  // namespace rs::engine
