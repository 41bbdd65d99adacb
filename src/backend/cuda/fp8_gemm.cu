#include "backend/cuda/fp8_gemm.cuh"

#include "backend/cuda/cuda_check.cuh"
#include "backend/cuda/device_context.cuh"
#include "base/log.h"

namespace rs::cuda {
namespace {

constexpr int64_t kGroup = 128;  // activation group and weight block edge of the block scaling

void set(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attribute, const void* value, size_t bytes) {
  RS_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, attribute, value, bytes));
}

}  // namespace

Fp8Gemm::Fp8Gemm(DeviceContext& ctx) : ctx_(ctx), handle_(reinterpret_cast<cublasLtHandle_t>(ctx.cublas())) {}

Fp8Gemm::~Fp8Gemm() {
  for (auto& [key, plan] : plans_) destroy(plan);
}

void Fp8Gemm::destroy(Plan& plan) {
  if (plan.desc) (void)cublasLtMatmulDescDestroy(plan.desc);
  for (cublasLtMatrixLayout_t layout : {plan.a, plan.b, plan.d})
    if (layout) (void)cublasLtMatrixLayoutDestroy(layout);
  plan = Plan{};
}

bool Fp8Gemm::supports(const LinearWeight& w) {
  if (w.format != LinearWeight::Format::kFp8 || w.out_features % 16 != 0 || w.in_features % 16 != 0) return false;
  const bool channel = w.scale_block_rows == 1 && w.scales.dim(1) == 1;
  // Block scales: cuBLASLt reads the scale grids with a leading dimension of ceil(in / 128), which must be a multiple
  // of 4 floats.
  const bool block = w.scale_block_rows == kGroup && w.scale_block_cols == kGroup && w.in_features % (4 * kGroup) == 0;
  return channel || block;
}

// A = the weight, stored [out, in] row-major = column-major [in, out], used transposed (cuBLASLt's FP8 wants "TN");
// B = the quantized activations, column-major [in, tokens]; D = out, column-major [out, tokens] = row-major
// [tokens, out]. Scales: A's per output channel (M values) or per 128 x 128 block (the checkpoint's row-major
// [ceil(out/128), ceil(in/128)] grid is column-major over A's stored [in, out]); B's per token (N values) or per 1 x
// 128 group (row-major [tokens, in/128] = column-major [in/128, tokens]).
bool Fp8Gemm::try_plan(Plan& plan, int64_t m, int64_t n, int64_t k, Scaling scaling, bool bf16_out) {
  RS_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t transa = CUBLAS_OP_T, transb = CUBLAS_OP_N;
  set(plan.desc, CUBLASLT_MATMUL_DESC_TRANSA, &transa, sizeof transa);
  set(plan.desc, CUBLASLT_MATMUL_DESC_TRANSB, &transb, sizeof transb);
  const int32_t mode_a = scaling == Scaling::kChannel ? CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F
                                                      : CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
  const int32_t mode_b = scaling == Scaling::kChannel ? CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F
                                                      : CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
  set(plan.desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode_a, sizeof mode_a);
  set(plan.desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode_b, sizeof mode_b);
  const cudaDataType_t out_type = bf16_out ? CUDA_R_16BF : CUDA_R_32F;
  RS_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.a, CUDA_R_8F_E4M3, k, m, k));
  RS_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.b, CUDA_R_8F_E4M3, k, n, k));
  RS_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.d, out_type, m, n, m));
  cublasLtMatmulPreference_t preference = nullptr;
  RS_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&preference));
  const size_t workspace = DeviceContext::kCublasWorkspaceBytes;
  RS_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                                       sizeof workspace));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(handle_, plan.desc, plan.a, plan.b, plan.d, plan.d,
                                                               preference, 1, &result, &found);
  (void)cublasLtMatmulPreferenceDestroy(preference);
  if (status != CUBLAS_STATUS_SUCCESS || found == 0) {
    destroy(plan);
    return false;
  }
  plan.algo = result.algo;
  plan.bf16_out = bf16_out;
  plan.ok = true;
  return true;
}

Fp8Gemm::Plan& Fp8Gemm::plan(int64_t m, int64_t n, int64_t k, Scaling scaling) {
  const auto key = std::make_tuple(m, n, k, static_cast<int>(scaling));
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second;
  if (plans_.size() >= 4096) {  // prefill chunk lengths vary: bound the cache
    for (auto& [old_key, old] : plans_) destroy(old);
    plans_.clear();
  }
  Plan& plan = plans_[key];
  // f32 out where cuBLASLt offers it (no widening pass), else bf16.
  if (!try_plan(plan, m, n, k, scaling, false) && !try_plan(plan, m, n, k, scaling, true))
    RS_LOG_WARN("FP8 GEMM [{} x {}] x {} tokens ({} scaling): cuBLASLt has no algorithm; dequantizing to bf16 instead",
                m, k, n, scaling == Scaling::kChannel ? "per-channel" : "128x128 block");
  else
    RS_LOG_DEBUG("FP8 GEMM [{} x {}] x {} tokens: cuBLASLt W8A8, {} out", m, k, n, plan.bf16_out ? "bf16" : "f32");
  return plan;
}

bool Fp8Gemm::run(const float* x, int64_t tokens, const LinearWeight& w, float* out) {
  if (!supports(w) || tokens <= 0) return false;
  const int64_t m = w.out_features, k = w.in_features;
  const Scaling scaling = w.scale_block_rows == 1 ? Scaling::kChannel : Scaling::kBlock128;
  Plan& p = plan(m, tokens, k, scaling);
  if (!p.ok) return false;
  const int64_t group = scaling == Scaling::kChannel ? k : kGroup;
  const int64_t groups = k / group;
  auto* codes = static_cast<uint8_t*>(ctx_.scratch(ScratchSlot::kFp8Act, static_cast<size_t>(tokens * k)));
  auto* scales = static_cast<float*>(ctx_.scratch(ScratchSlot::kFp8ActScales, tokens * groups * sizeof(float)));
  launch_quantize_fp8_groups(x, tokens, k, group, codes, scales, ctx_.stream());
  const void* a_scale = w.scales.data();
  set(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &a_scale, sizeof a_scale);
  set(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &scales, sizeof scales);
  void* d = out;
  if (p.bf16_out) d = ctx_.scratch(ScratchSlot::kFp8Out, static_cast<size_t>(tokens * m) * 2);
  const float one = 1.0f, zero = 0.0f;
  RS_CUBLAS_CHECK(cublasLtMatmul(handle_, p.desc, &one, w.weight.data(), p.a, codes, p.b, &zero, d, p.d, d, p.d,
                                 &p.algo, ctx_.cublas_workspace(), DeviceContext::kCublasWorkspaceBytes,
                                 ctx_.stream()));
  if (p.bf16_out) launch_widen_bf16(d, tokens * m, out, ctx_.stream());
  return true;
}

}  // namespace rs::cuda
