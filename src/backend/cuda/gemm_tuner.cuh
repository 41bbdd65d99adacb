// GemmTuner: the fast path's dense bf16 GEMMs through cuBLASLt with the algorithm chosen once per shape (issue 9:
// "algorithms chosen once per shape and cached"). out [n, m] (f32) = x [n, k] (bf16) . W [m, k]^T (bf16) with f32
// accumulation, i.e. cublasGemmEx(OP_T, OP_N, m, n, k) in column-major terms.
//
// The first eager call of a shape times cublasGemmEx's own choice against cuBLASLt's first kCandidates heuristic
// algorithms on the call's operands and keeps the fastest (measured on the H200, docs/notes/cuda-attention.md session
// 21: 5-6% on the 8B's GEMMs from 2k rows, up to 35% on the 0.6B's small ones; cuBLASLt's first choice alone is no
// better than cublasGemmEx). Shapes are keyed by (m, k, n) for n <= 256 (decode and graph batch sizes) and by n's
// next power of two above that (prefill chunks). A shape first met while a CUDA graph records runs cublasGemmEx
// untimed and is timed at its first eager call. A kept algorithm that cannot run another n of its bucket falls back
// to cublasGemmEx for that call. The choice comes from timings, so another card or another start may keep another
// algorithm (sums in another order: last-bit differences in the fast path only); a candidate must win by kMargin to
// be kept, which makes that rare. Exact and deterministic modes never come here.
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <unordered_map>

namespace rs::cuda {

class GemmTuner {
 public:
  // blas: the context's handle, whose stream every run() must pass; workspace: shared with it (one stream, in order).
  GemmTuner(cublasHandle_t blas, void* workspace, size_t workspace_bytes);
  ~GemmTuner();
  GemmTuner(const GemmTuner&) = delete;
  GemmTuner& operator=(const GemmTuner&) = delete;

  // Enqueues the GEMM on `stream` (out is overwritten). Times the shape first when it has no choice yet and the
  // stream is not recording a graph: that call synchronises the stream.
  void run(int m, int n, int k, const void* w, const void* x, float* out, cudaStream_t stream);

  // Shapes timed so far, and how many of them kept a cuBLASLt algorithm over cublasGemmEx.
  int64_t tuned_shapes() const { return static_cast<int64_t>(choices_.size()); }
  int64_t lt_choices() const;

  static constexpr int kCandidates = 8;    // cuBLASLt heuristic results timed per shape
  static constexpr int kReps = 5;          // timed runs per candidate, after one warm-up run
  static constexpr float kMargin = 0.03f;  // how much faster a candidate must be than the best so far to replace it

 private:
  struct Choice {
    bool lt = false;  // else cublasGemmEx
    cublasLtMatmulAlgo_t algo{};
  };
  static uint64_t key(int m, int n, int k);
  Choice tune(int m, int n, int k, const void* w, const void* x, float* out, cudaStream_t stream);
  void run_gemm_ex(int m, int n, int k, const void* w, const void* x, float* out, cudaStream_t stream) const;
  // False (nothing enqueued) when cuBLASLt refuses the algorithm for this shape.
  bool run_lt(const cublasLtMatmulAlgo_t& algo, int m, int n, int k, const void* w, const void* x, float* out,
              cudaStream_t stream) const;

  cublasHandle_t blas_;
  cublasLtHandle_t lt_ = nullptr;
  cublasLtMatmulDesc_t desc_ = nullptr;  // bf16 x bf16 -> f32, f32 compute, W transposed
  void* workspace_;
  size_t workspace_bytes_;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  std::unordered_map<uint64_t, Choice> choices_;
};

}  // namespace rs::cuda
