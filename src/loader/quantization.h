// QuantizationConfig: how a checkpoint's linear weights are stored, from config.json's `quantization_config` (or
// `quantization`), plus `--quantization` (formats made at load time from a bf16/f32 checkpoint). The tensors decide the
// rest: a module stored in F8_E4M3 beside its scale is FP8 whatever the ignore list says, one stored in bf16 is dense.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace rs::loader {

enum class QuantMethod : uint8_t {
  kNone,
  kMxfp4,              // gpt-oss experts (quant_method "mxfp4")
  kFp8,                // transformers' fine-grained FP8 (quant_method "fp8"): weight_scale_inv per block
  kCompressedTensors,  // compressed-tensors "float-quantized" FP8: weight_scale per tensor, channel or block
  kMlxAffine,          // mlx_lm's `quantization` {group_size, bits}: u32-packed weight + scales + biases
  kAwq,                // AutoAWQ GEMM: qweight [in, out/8] (interleaved nibbles), qzeros, scales per group
  kGptq,               // GPTQ: qweight [in * bits/32, out], qzeros, scales, g_idx
};

struct QuantizationConfig {
  QuantMethod method = QuantMethod::kNone;
  std::string method_name;  // as config.json spells it, for messages
  // kFp8: weight_block_size [rows, cols] (128 x 128 in Qwen's and DeepSeek's releases); 0 = per-tensor scales.
  int64_t block_rows = 0, block_cols = 0;
  // --quantization fp8: dense f32/bf16/f16 projections become FP8 with one scale per output channel as they load.
  bool fp8_on_load = false;
  // Integer formats: the checkpoint's bits and group size (MLX: the global ones; a module's own override and its
  // tensors' shapes take precedence). GPTQ's v1 checkpoint format stores zero points minus one.
  int32_t bits = 0;
  int64_t group_size = 0;
  bool gptq_zero_minus_one = false;

  bool is_fp8() const { return method == QuantMethod::kFp8 || method == QuantMethod::kCompressedTensors; }
  bool is_integer() const {
    return method == QuantMethod::kMlxAffine || method == QuantMethod::kAwq || method == QuantMethod::kGptq;
  }
};

// Parses config.json's quantization_config (or MLX's `quantization`); `on_load` is --quantization ("" or "fp8").
// Throws, naming `source`, for methods and settings radixserve cannot load (3/5/6-bit MLX, AWQ GEMV, int compressed-
// tensors, ...), so a checkpoint fails at start-up with the reason rather than with a dtype error deep in the loader.
QuantizationConfig parse_quantization_config(const nlohmann::json& config, const std::string& source,
                                             const std::string& on_load = "");

}  // namespace rs::loader
