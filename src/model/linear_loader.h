// The one place that turns a checkpoint's tensors into LinearWeight handles of any storage format (model files ask
// for a module and get whatever kind the checkpoint holds): dense f32/bf16/f16; FP8 E4M3 with block, per-channel or
// per-tensor scales (transformers' fine-grained `weight_scale_inv`, compressed-tensors' `weight_scale`); or dense
// weights quantized to per-channel FP8 as they load (--quantization fp8). Handles are host-side here; the model
// uploads them and the backend prepares them.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "loader/quantization.h"
#include "loader/weight_source.h"

namespace rs {
class ThreadPool;
}

namespace rs::model {

class LinearLoader {
 public:
  // `owned` keeps every buffer this loader makes (concatenations, scales, quantized copies) for the model's life.
  LinearLoader(loader::WeightSource& weights, const loader::QuantizationConfig& quantization,
               std::vector<Buffer>& owned)
      : weights_(weights), quantization_(quantization), owned_(owned) {}

  // Module `module` ("model.layers.0.self_attn.q_proj"; its tensors are module + ".weight" and, when quantized, the
  // scales beside it) as a [out, in] weight. `quantizable`: whether --quantization may quantize it (routers and
  // one-row gates stay as stored, as in vLLM).
  LinearWeight load(const std::string& module, int64_t out, int64_t in, bool quantizable = true);
  // A stored dense [out, in] tensor as a handle (quantized on load where --quantization asks; `name`, when given, is
  // the tensor whose loaded size then shrinks to the quantized one).
  LinearWeight from_dense(const Tensor& weight, bool quantizable = true, const std::string& name = "");
  // The rows of several weights of one format stacked into one [sum rows, in] weight (fused q|k|v, gate|up).
  LinearWeight stack_rows(std::span<const LinearWeight> parts);
  // The given rows of `w`, in that order.
  LinearWeight select_rows(const LinearWeight& w, const std::vector<int64_t>& rows);

 private:
  Tensor keep(Buffer buffer, DType dtype, std::vector<int64_t> shape);
  LinearWeight load_fp8(const std::string& module, const Tensor& weight, int64_t out, int64_t in);
  LinearWeight quantize_fp8(const Tensor& weight, const std::string& name, int64_t block_rows, int64_t block_cols);
  // `w` (FP8) with one scale row per weight row: stacking and row selection then never split a scale block.
  LinearWeight fp8_row_scales(const LinearWeight& w);

  loader::WeightSource& weights_;
  const loader::QuantizationConfig& quantization_;
  std::vector<Buffer>& owned_;
  std::shared_ptr<ThreadPool> pool_;  // quantizes on load, made on first use
};

}  // namespace rs::model
