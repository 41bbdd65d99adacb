// The one place that turns a checkpoint's tensors into LinearWeight handles of any storage format (model files ask
// for a module and get whatever kind the checkpoint holds): dense f32/bf16/f16; FP8 E4M3 with block, per-channel or
// per-tensor scales (transformers' fine-grained `weight_scale_inv`, compressed-tensors' `weight_scale`); integer
// codes with per-group scales (MLX affine, AWQ, GPTQ: one kind, kAffine; linear_loader_int.cpp); or dense weights
// quantized to per-channel FP8 as they load (--quantization fp8). Handles are host-side here; the model uploads them
// and the backend prepares them.
#pragma once

#include <memory>
#include <optional>
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
  // Expert `index` of `count` experts stored stacked as one [count, out, in] module (mlx_lm's switch_mlp), or nullopt
  // when the checkpoint stores no such stack.
  std::optional<LinearWeight> load_expert(const std::string& module, int64_t index, int64_t count, int64_t out,
                                          int64_t in);
  // An embedding table [rows, width] in its stored format: dense, or integer codes where the checkpoint quantizes it
  // (MLX; Backend::embedding_affine looks rows up from the codes). A tied LM head is this same weight.
  LinearWeight embedding(const std::string& module, int64_t rows, int64_t width);
  // The rows of several weights stacked into one [sum rows, in] weight (fused q|k|v, gate|up). Parts of one format
  // keep it; integer and dense parts of different formats or group shapes become exact f32.
  LinearWeight stack_rows(std::span<const LinearWeight> parts);
  // The given rows of `w`, in that order.
  LinearWeight select_rows(const LinearWeight& w, const std::vector<int64_t>& rows);

 private:
  Tensor keep(Buffer buffer, DType dtype, std::vector<int64_t> shape);
  LinearWeight load_fp8(const std::string& module, const Tensor& weight, int64_t out, int64_t in);
  LinearWeight quantize_fp8(const Tensor& weight, const std::string& name, int64_t block_rows, int64_t block_cols);
  // `w` (FP8) with one scale row per weight row: stacking and row selection then never split a scale block.
  LinearWeight fp8_row_scales(const LinearWeight& w);

  // Integer formats (linear_loader_int.cpp).
  struct TensorSlice {
    int64_t stack = 0;  // experts in a stacked tensor, 0: not stacked
    int64_t index = 0;
  };
  static LinearWeight affine(Tensor codes, Tensor pairs, int64_t out, int64_t in, int bits, int64_t group);
  LinearWeight load_mlx(const std::string& module, const TensorSlice& slice, int64_t out, int64_t in);
  LinearWeight load_awq(const std::string& module, int64_t out, int64_t in);
  LinearWeight load_gptq(const std::string& module, int64_t out, int64_t in);
  LinearWeight quantize_affine(const Tensor& weight, const std::string& name, int bits, int64_t group);
  // `w` (kAffine) re-encoded exactly with `bits` >= w.bits and a `group` dividing w's (codes widened, each pair
  // repeated over the finer groups).
  LinearWeight widen_affine(const LinearWeight& w, int bits, int64_t group);
  ThreadPool& pool();

  loader::WeightSource& weights_;
  const loader::QuantizationConfig& quantization_;
  std::vector<Buffer>& owned_;
  std::shared_ptr<ThreadPool> pool_;  // quantizes on load, made on first use
};

// Element i of an f32/bf16/f16 host tensor as f32 (scales and weights of any float dtype a checkpoint stores).
float load_float(const Tensor& t, int64_t i);

// `w` (dense or kAffine) exactly dequantized to an f32 [out, in] tensor whose memory `owned` keeps.
Tensor dequantize_to_f32(const LinearWeight& w, std::vector<Buffer>& owned);

}  // namespace rs::model
