// FP8 W8A8 GEMMs on Hopper's tensor cores through cuBLASLt: activations are quantized to E4M3 on the fly (one scale
// per token, or per token and 128-column group), multiplied with the FP8 weight at f32 accumulation, and both scales
// applied inside the GEMM where cuBLASLt offers the scaling (outer-vector, or 1x128 / 128x128 blocks: CUDA 12.9+ on
// sm_90). Per-channel weights otherwise run the GEMM unscaled (the tensor-wide mode every FP8 cuBLASLt has) and apply
// the two scale vectors in one pass over the output: the same arithmetic, one more pass.
#pragma once

#include <cublasLt.h>

#include <cstdint>
#include <map>
#include <set>
#include <tuple>

#include "backend/backend.h"

namespace rs::cuda {

class DeviceContext;

class Fp8Gemm {
 public:
  explicit Fp8Gemm(DeviceContext& ctx);
  ~Fp8Gemm();
  Fp8Gemm(const Fp8Gemm&) = delete;
  Fp8Gemm& operator=(const Fp8Gemm&) = delete;

  // The scalings cuBLASLt applies itself: weights per output channel ([out, 1] scales) with activations per token,
  // or 128 x 128 weight blocks with activations per 1 x 128 group. Other layouts (and shapes cuBLASLt refuses) return
  // false from run(), and the caller takes another path.
  static bool supports(const LinearWeight& w);
  // out [tokens, out] f32 = x [tokens, in] f32 . W^T, W8A8. False (nothing enqueued) when no cuBLASLt algorithm
  // takes this shape; the answer is cached per shape.
  bool run(const float* x, int64_t tokens, const LinearWeight& w, float* out);

 private:
  enum class Scaling : int { kChannel, kBlock128 };
  struct Plan {
    bool ok = false;
    bool bf16_out = false;      // the algorithm found writes bf16 (widened to f32 after)
    bool scaled_after = false;  // tensor-wide mode at scale 1: the outer scales are applied to the output after
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  // The plan of a shape; `a_scale` and `b_scale` are set before cuBLASLt's heuristic is asked (it may check them).
  Plan& plan(int64_t m, int64_t n, int64_t k, Scaling scaling, const void* a_scale, const void* b_scale);
  bool try_plan(Plan& plan, int64_t m, int64_t n, int64_t k, Scaling scaling, bool bf16_out, bool scaled_after,
                const void* a_scale, const void* b_scale);
  static void destroy(Plan& plan);

  DeviceContext& ctx_;
  cublasLtHandle_t handle_;
  std::map<std::tuple<int64_t, int64_t, int64_t, int>, Plan> plans_;
  std::set<std::tuple<int, bool, bool>> logged_;  // the kinds of plan found so far (each logged once)
};

}  // namespace rs::cuda
