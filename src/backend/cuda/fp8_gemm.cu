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
  // Block scales: cuBLASLt reads the weight's grid with a leading dimension of ceil(in / 128), a multiple of 4 floats,
  // and whole 128-row blocks.
  const bool block = w.scale_block_rows == kGroup && w.scale_block_cols == kGroup &&
                     w.in_features % (4 * kGroup) == 0 && w.out_features % kGroup == 0;
  return channel || block;
}

// A = the weight, stored [out, in] row-major = column-major [in, out], used transposed (cuBLASLt's FP8 wants "TN");
// B = the quantized activations, column-major [in, tokens]; D = out, column-major [out, tokens] = row-major
// [tokens, out]. Scales: A's per output channel (M values) or per 128 x 128 block (the checkpoint's row-major
// [ceil(out/128), ceil(in/128)] grid is column-major over A's stored [in, out]); B's per token (N values) or per 1 x
// 128 group (row-major [tokens, in/128] = column-major [in/128, tokens]).
bool Fp8Gemm::try_plan(Plan& plan, int64_t m, int64_t n, int64_t k, Scaling scaling, bool bf16_out, bool scaled_after,
                       const void* a_scale, const void* b_scale) {
  RS_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t transa = CUBLAS_OP_T, transb = CUBLAS_OP_N;
  set(plan.desc, CUBLASLT_MATMUL_DESC_TRANSA, &transa, sizeof transa);
  set(plan.desc, CUBLASLT_MATMUL_DESC_TRANSB, &transb, sizeof transb);
  if (!scaled_after) {
    const int32_t mode_a = scaling == Scaling::kChannel ? CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F
                                                        : CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F;
    const int32_t mode_b = scaling == Scaling::kChannel ? CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F
                                                        : CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
    set(plan.desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode_a, sizeof mode_a);
    set(plan.desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode_b, sizeof mode_b);
    set(plan.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &a_scale, sizeof a_scale);
    set(plan.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &b_scale, sizeof b_scale);
  }
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
    RS_LOG_DEBUG("cuBLASLt FP8 [{} x {}] x {}: {} {} out: {} ({} found)", m, k, n,
                 scaled_after                   ? "unscaled"
                 : scaling == Scaling::kChannel ? "outer-vector"
                                                : "block",
                 bf16_out ? "bf16" : "f32", static_cast<int>(status), found);
    destroy(plan);
    return false;
  }
  plan.algo = result.algo;
  plan.bf16_out = bf16_out;
  plan.scaled_after = scaled_after;
  plan.ok = true;
  return true;
}

Fp8Gemm::Plan& Fp8Gemm::plan(int64_t m, int64_t n, int64_t k, Scaling scaling, const void* a_scale,
                             const void* b_scale) {
  const auto key = std::make_tuple(m, n, k, static_cast<int>(scaling));
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second;
  if (plans_.size() >= 4096) {  // prefill chunk lengths vary: bound the cache
    for (auto& [old_key, old] : plans_) destroy(old);
    plans_.clear();
  }
  Plan& plan = plans_[key];
  // Scales inside the GEMM first, f32 out where offered (no widening pass); per-channel weights may then run unscaled
  // with the scales applied after.
  bool ok = try_plan(plan, m, n, k, scaling, false, false, a_scale, b_scale) ||
            try_plan(plan, m, n, k, scaling, true, false, a_scale, b_scale);
  if (!ok && scaling == Scaling::kChannel)
    ok = try_plan(plan, m, n, k, scaling, false, true, a_scale, b_scale) ||
         try_plan(plan, m, n, k, scaling, true, true, a_scale, b_scale);
  const char* kind = scaling == Scaling::kChannel ? "per-channel" : "128x128 block";
  if (!ok) {
    RS_LOG_WARN("FP8 GEMM [{} x {}] x {} tokens ({} scaling): cuBLASLt has no algorithm; dequantizing to bf16 instead",
                m, k, n, kind);
  } else if (logged_.insert(std::make_tuple(static_cast<int>(scaling), plan.bf16_out, plan.scaled_after)).second) {
    RS_LOG_INFO("FP8 GEMM ({} scaling): cuBLASLt W8A8, scales {}, {} out", kind,
                plan.scaled_after ? "applied after an unscaled GEMM" : "inside the GEMM",
                plan.bf16_out ? "bf16" : "f32");
  }
  return plan;
}

bool Fp8Gemm::run(const float* x, int64_t tokens, const LinearWeight& w, float* out) {
  if (!supports(w) || tokens <= 0) return false;
  const int64_t m = w.out_features, k = w.in_features;
  const Scaling scaling = w.scale_block_rows == 1 ? Scaling::kChannel : Scaling::kBlock128;
  const int64_t group = scaling == Scaling::kChannel ? k : kGroup;
  const int64_t groups = k / group;
  // Block scaling runs on a multiple of 4 tokens: the padding rows are zero codes, their outputs never read.
  const int64_t n = scaling == Scaling::kChannel ? tokens : (tokens + 3) / 4 * 4;
  auto* codes = static_cast<uint8_t*>(ctx_.scratch(ScratchSlot::kFp8Act, static_cast<size_t>(n * k)));
  auto* scales = static_cast<float*>(ctx_.scratch(ScratchSlot::kFp8ActScales, n * groups * sizeof(float)));
  const void* a_scale = w.scales.data();
  Plan& p = plan(m, n, k, scaling, a_scale, scales);
  if (!p.ok) return false;
  if (n > tokens) {
    RS_CUDA_CHECK(cudaMemsetAsync(codes + tokens * k, 0, (n - tokens) * k, ctx_.stream()));
    RS_CUDA_CHECK(cudaMemsetAsync(scales, 0, n * groups * sizeof(float), ctx_.stream()));
  }
  // Scales token after token within each group (per-token scaling has the one group).
  launch_quantize_fp8_groups(x, tokens, k, group, codes, scales, /*row_pitch=*/1, /*group_pitch=*/n, ctx_.stream());
  if (!p.scaled_after) {
    set(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &a_scale, sizeof a_scale);
    set(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &scales, sizeof scales);
  }
  // D is written in place unless it is bf16 (widened after) or padded (its first `tokens` columns copied after).
  void* d = out;
  if (p.bf16_out || n > tokens)
    d = ctx_.scratch(ScratchSlot::kFp8Out, static_cast<size_t>(n * m) * (p.bf16_out ? 2 : 4));
  const float one = 1.0f, zero = 0.0f;
  RS_CUBLAS_CHECK(cublasLtMatmul(handle_, p.desc, &one, w.weight.data(), p.a, codes, p.b, &zero, d, p.d, d, p.d,
                                 &p.algo, ctx_.cublas_workspace(), DeviceContext::kCublasWorkspaceBytes,
                                 ctx_.stream()));
  if (p.scaled_after) {  // out [tokens, m]: rows scale by the token's scale, columns by the channel's
    launch_scale_outer(d, p.bf16_out, tokens, m, scales, w.scales.data_as<float>(), out, ctx_.stream());
  } else if (p.bf16_out) {
    launch_widen_bf16(d, tokens * m, out, ctx_.stream());
  } else if (d != out) {
    RS_CUDA_CHECK(cudaMemcpyAsync(out, d, static_cast<size_t>(tokens * m) * sizeof(float), cudaMemcpyDeviceToDevice,
                                  ctx_.stream()));
  }
  return true;
}

}  // namespace rs::cuda
