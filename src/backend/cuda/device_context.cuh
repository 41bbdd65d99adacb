// DeviceContext: what every CUDA op needs on one device (stream, cuBLAS handle, error word, growable scratch, MoE
// expert pointer tables). Shared by the backend and by the deleters of its Buffers, so it outlives the last of them.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/kernels/kernels.cuh"

namespace rs::cuda {

class Fp8Gemm;

// Scratch buffers for op temporaries; one op never holds two uses of the same slot.
enum class ScratchSlot : int {
  kSplitHi,
  kSplitLo,
  kAttention,
  kMoeMeta,
  kMoeHidden,
  kMoeAct,
  kMoeOut,
  kSample,
  kFp8Weight,     // an FP8 weight dequantized to bf16 for cuBLAS
  kFp8Act,        // activations quantized to FP8 for a W8A8 GEMM
  kFp8ActScales,  // their scales
  kFp8Out,        // a W8A8 GEMM's bf16 output before it widens to f32
  kOrderedInput,  // activations gathered into a weight's input_order (GPTQ act-order)
  kCount
};

// Device pointer arrays of one list of expert weights (weights, then MXFP4 scales).
struct ExpertTable {
  const void* const* weights = nullptr;
  const uint8_t* const* scales = nullptr;
};

class DeviceContext {
 public:
  DeviceContext(int index, bool exact_f32);
  ~DeviceContext();
  DeviceContext(const DeviceContext&) = delete;
  DeviceContext& operator=(const DeviceContext&) = delete;

  int index() const { return index_; }
  cudaStream_t stream() const { return stream_; }
  cublasHandle_t cublas() const { return cublas_; }
  // cuBLAS's workspace, which cuBLASLt calls on the same stream share.
  void* cublas_workspace() const { return cublas_workspace_; }
  static constexpr size_t kCublasWorkspaceBytes = size_t{32} << 20;
  // FP8 W8A8 GEMMs through cuBLASLt (fp8_gemm.cu), made on first use.
  class Fp8Gemm& fp8_gemm();
  int num_sms() const { return num_sms_; }
  int compute_major() const { return compute_major_; }
  const std::string& device_name() const { return device_name_; }
  size_t total_memory() const { return total_memory_; }
  uint32_t* error_flags() const { return error_flags_; }
  // Zeroed arrival counters for kernels whose last block merges the others' results (flash attention's key splits);
  // each user leaves its counters at zero again, so graphs replay over the same words.
  uint32_t* split_counters() const { return split_counters_; }
  static constexpr int64_t kSplitCounters = 1 << 16;
  // Exact mode: bf16 GEMMs on hi/lo splits of f32 activations (reference numerics); otherwise activations are
  // rounded to bf16 once.
  bool exact_f32() const { return exact_f32_; }
  // Batch-invariant numerics (--enable-deterministic-inference): every kernel choice that depends on the number of
  // rows in a step is fixed, so a row's result does not depend on what shares its step.
  bool batch_invariant() const { return batch_invariant_; }
  void set_batch_invariant(bool on) { batch_invariant_ = on; }
  // Bumped whenever a scratch slot that graphs read moves (graphs recorded earlier point at freed memory and must be
  // recaptured); kSample is used only outside graphs.
  uint64_t scratch_epoch() const { return scratch_epoch_; }
  // While a graph is being recorded, scratch() must not allocate (it throws instead).
  void set_capturing(bool capturing) { capturing_ = capturing; }

  // Makes this device current on the calling thread (cheap when it already is).
  void activate() const;
  // Waits for the stream, then throws rs::Error if a kernel flagged bad input since the last call.
  void synchronize_and_check();
  // At least `bytes` of device memory for `slot`, stream-ordered: valid for work enqueued until the next call for the
  // same slot.
  void* scratch(ScratchSlot slot, size_t bytes);
  // Device pointer table for a list of expert weights (cached by the list's pointers; built once per MoE layer).
  ExpertTable expert_table(const std::vector<LinearWeight>& experts);

 private:
  struct CachedTable {
    std::vector<const void*> host;  // weights then scales, as uploaded
    void* device = nullptr;
  };

  int index_;
  bool exact_f32_ = false;
  bool batch_invariant_ = false;
  bool capturing_ = false;
  uint64_t scratch_epoch_ = 0;
  void* cublas_workspace_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  int num_sms_ = 0;
  int compute_major_ = 0;
  std::string device_name_;
  size_t total_memory_ = 0;
  uint32_t* error_flags_ = nullptr;       // device word
  uint32_t* error_flags_host_ = nullptr;  // pinned mirror read at synchronize()
  uint32_t* split_counters_ = nullptr;    // [kSplitCounters] device words, zero between kernels
  std::array<void*, static_cast<size_t>(ScratchSlot::kCount)> scratch_{};
  std::array<size_t, static_cast<size_t>(ScratchSlot::kCount)> scratch_bytes_{};
  std::unordered_map<const void*, CachedTable> expert_tables_;
  std::unique_ptr<Fp8Gemm> fp8_gemm_;
};

ElemType elem_type(DType dtype);

// Linear layers and MoE experts (linear.cu): GEMV, tiled GEMM or cuBLAS by shape and format.
void run_linear(DeviceContext& ctx, const Tensor& x, const LinearWeight& w, const Tensor& bias, Tensor out);
// Whether the kernels read an integer (kAffine) weight as it is: 4 bits in groups of 32k, 8 bits in groups of 16k.
bool affine_readable(const LinearWeight& w);
// out [T, I] = silu(x . gate^T) * (x . up^T) in one GEMV pass over gate_up [2I, in] when the GEMV applies (few rows);
// returns false, doing nothing, otherwise.
bool run_linear_silu_mul(DeviceContext& ctx, const Tensor& x, const LinearWeight& gate_up, Tensor out);
// The router of Backend::moe: logits f32 [T, num_experts] routed into ids/weights by run_moe_experts itself.
struct MoeRouter {
  const float* logits = nullptr;
  int32_t num_experts = 0;
  bool softmax_first = false;  // MoeRouting::kSoftmaxTopK
  bool renormalize = false;
};
// out = the experts of ids/weights applied to x. With a router, ids/weights are first computed from its logits
// (decode batches: the top-k and the grouping by expert in one launch).
void run_moe_experts(DeviceContext& ctx, const Tensor& x, const Tensor& ids, const Tensor& weights,
                     const MoeWeights& experts, Tensor out, const MoeRouter* router = nullptr);

}  // namespace rs::cuda
