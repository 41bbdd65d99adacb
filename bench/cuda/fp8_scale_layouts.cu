// Lab: which scale layouts cuBLASLt's FP8 block scaling (A: 128x128 blocks, B: 1x128 groups; CUDA 12.9+, sm_90)
// reads, and what its FP8 GEMMs achieve. The scaling modes' docs leave the scale tensors' order implicit; this tries
// each candidate on random data against an f64 reference of the same quantized operands and prints the error (a right
// layout lands near 1e-6, a wrong one near 1e-1). Then it times the FP8 GEMM (per-channel and block scaling) against
// bf16 cuBLAS at a decode and a prefill shape. Run on a GPU machine: build/bin/fp8_scale_layouts.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "tensor/dtype.h"

namespace {

#define CHECK_CUDA(x)                                                                      \
  do {                                                                                     \
    cudaError_t e_ = (x);                                                                  \
    if (e_ != cudaSuccess) {                                                               \
      std::printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); \
      std::exit(1);                                                                        \
    }                                                                                      \
  } while (0)

constexpr int kBlock = 128;

struct Quantized {
  std::vector<uint8_t> codes;
  std::vector<float> scales;   // per group: row-major [rows, groups] (1 x group) or [row blocks, col blocks]
  std::vector<double> values;  // dequantized
};

// Rows of `x` [rows, cols] quantized per 1 x group (group = cols: per row) or per block x block (block_rows > 1).
Quantized quantize(const std::vector<float>& x, int rows, int cols, int block_rows, int block_cols) {
  Quantized q;
  const int rb = (rows + block_rows - 1) / block_rows, cb = (cols + block_cols - 1) / block_cols;
  q.codes.resize(x.size());
  q.values.resize(x.size());
  q.scales.resize(static_cast<size_t>(rb) * cb);
  for (int i = 0; i < rb; ++i)
    for (int j = 0; j < cb; ++j) {
      float amax = 0;
      for (int r = i * block_rows; r < std::min(rows, (i + 1) * block_rows); ++r)
        for (int c = j * block_cols; c < std::min(cols, (j + 1) * block_cols); ++c)
          amax = std::max(amax, std::fabs(x[r * cols + c]));
      const float scale = amax > 0 ? amax / 448.0f : 1.0f;
      q.scales[i * cb + j] = scale;
      for (int r = i * block_rows; r < std::min(rows, (i + 1) * block_rows); ++r)
        for (int c = j * block_cols; c < std::min(cols, (j + 1) * block_cols); ++c) {
          q.codes[r * cols + c] = rs::f32_to_fp8_e4m3(x[r * cols + c] / scale);
          q.values[r * cols + c] = double(rs::fp8_e4m3_to_f32(q.codes[r * cols + c])) * scale;
        }
    }
  return q;
}

template <typename T>
T* upload(const std::vector<T>& v) {
  T* d = nullptr;
  CHECK_CUDA(cudaMalloc(&d, std::max<size_t>(v.size(), 1) * sizeof(T)));
  CHECK_CUDA(cudaMemcpy(d, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  return d;
}

struct Gemm {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool ok = false;
};

// D [m, n] f32 (column-major) = A^T B with A stored [k, m] (ld k), B [k, n] (ld k), both E4M3.
Gemm plan(cublasLtHandle_t lt, int m, int n, int k, int mode_a, int mode_b, const void* sa, const void* sb,
          void* workspace, size_t workspace_bytes) {
  Gemm g;
  cublasLtMatmulDescCreate(&g.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  cublasLtMatmulDescSetAttribute(g.desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
  cublasLtMatmulDescSetAttribute(g.desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
  cublasLtMatmulDescSetAttribute(g.desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode_a, sizeof mode_a);
  cublasLtMatmulDescSetAttribute(g.desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode_b, sizeof mode_b);
  cublasLtMatmulDescSetAttribute(g.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa, sizeof sa);
  cublasLtMatmulDescSetAttribute(g.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb, sizeof sb);
  cublasLtMatrixLayoutCreate(&g.a, CUDA_R_8F_E4M3, k, m, k);
  cublasLtMatrixLayoutCreate(&g.b, CUDA_R_8F_E4M3, k, n, k);
  cublasLtMatrixLayoutCreate(&g.d, CUDA_R_32F, m, n, m);
  cublasLtMatmulPreference_t pref;
  cublasLtMatmulPreferenceCreate(&pref);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes,
                                       sizeof workspace_bytes);
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t status =
      cublasLtMatmulAlgoGetHeuristic(lt, g.desc, g.a, g.b, g.d, g.d, pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  g.ok = status == CUBLAS_STATUS_SUCCESS && found > 0;
  g.algo = result.algo;
  (void)workspace;
  return g;
}

double run_error(cublasLtHandle_t lt, Gemm& g, const uint8_t* a, const uint8_t* b, float* d, int m, int n,
                 const std::vector<double>& ref, void* workspace, size_t workspace_bytes) {
  const float one = 1, zero = 0;
  CHECK_CUDA(cudaMemset(d, 0xff, sizeof(float) * m * n));  // NaN poison: unwritten outputs show
  if (cublasLtMatmul(lt, g.desc, &one, a, g.a, b, g.b, &zero, d, g.d, d, g.d, &g.algo, workspace, workspace_bytes,
                     nullptr) != CUBLAS_STATUS_SUCCESS)
    return -1;
  CHECK_CUDA(cudaDeviceSynchronize());
  std::vector<float> out(static_cast<size_t>(m) * n);
  CHECK_CUDA(cudaMemcpy(out.data(), d, out.size() * sizeof(float), cudaMemcpyDeviceToHost));
  double max_diff = 0, max_ref = 0;
  for (int t = 0; t < n; ++t)
    for (int o = 0; o < m; ++o) {
      const double r = ref[static_cast<size_t>(t) * m + o], got = out[static_cast<size_t>(t) * m + o];
      if (std::isnan(got)) return INFINITY;
      max_diff = std::max(max_diff, std::fabs(got - r));
      max_ref = std::max(max_ref, std::fabs(r));
    }
  return max_diff / max_ref;
}

float time_ms(const std::function<void()>& f) {
  cudaEvent_t start, stop;
  cudaEventCreate(&start), cudaEventCreate(&stop);
  for (int i = 0; i < 3; ++i) f();
  std::vector<float> times;
  for (int rep = 0; rep < 15; ++rep) {
    cudaEventRecord(start);
    f();
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    times.push_back(ms);
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace

int main() {
  cublasHandle_t blas;
  cublasCreate(&blas);
  cublasLtHandle_t lt = reinterpret_cast<cublasLtHandle_t>(blas);
  const size_t workspace_bytes = size_t{32} << 20;
  void* workspace = nullptr;
  CHECK_CUDA(cudaMalloc(&workspace, workspace_bytes));
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  const int m = 512, k = 2048, mb = m / kBlock, kb = k / kBlock;
  std::vector<float> w(static_cast<size_t>(m) * k);
  for (auto& v : w) v = normal(rng) * (1 + (&v - w.data()) % 7);  // uneven block magnitudes
  const Quantized wq = quantize(w, m, k, kBlock, kBlock);
  const Quantized wc = quantize(w, m, k, 1, k);
  uint8_t* a = upload(wq.codes);
  uint8_t* a_channel = upload(wc.codes);
  // A's block scales in two orders: out-block major (the checkpoint's [out/128, in/128]) and in-block major.
  std::vector<float> a_kmajor(wq.scales.size());
  for (int i = 0; i < mb; ++i)
    for (int j = 0; j < kb; ++j) a_kmajor[j * mb + i] = wq.scales[i * kb + j];
  float* sa_rows = upload(wq.scales);
  float* sa_cols = upload(a_kmajor);
  float* sa_channel = upload(wc.scales);
  std::printf(
      "== block scaling: A 128x128 blocks, B 1x128 groups; m %d, k %d (error vs f64 of the same quantized values)\n", m,
      k);
  for (int n : {3, 4, 8, 9, 64, 200}) {
    std::vector<float> x(static_cast<size_t>(n) * k);
    for (size_t i = 0; i < x.size(); ++i) x[i] = normal(rng) * (1 + (i / 128) % 5);
    const Quantized xq = quantize(x, n, k, 1, kBlock), xc = quantize(x, n, k, 1, k);
    std::vector<double> ref(static_cast<size_t>(n) * m), ref_channel(ref.size());
    for (int t = 0; t < n; ++t)
      for (int o = 0; o < m; ++o) {
        double s = 0, sc = 0;
        for (int i = 0; i < k; ++i) {
          s += xq.values[static_cast<size_t>(t) * k + i] * wq.values[static_cast<size_t>(o) * k + i];
          sc += xc.values[static_cast<size_t>(t) * k + i] * wc.values[static_cast<size_t>(o) * k + i];
        }
        ref[static_cast<size_t>(t) * m + o] = s;
        ref_channel[static_cast<size_t>(t) * m + o] = sc;
      }
    uint8_t* b = upload(xq.codes);
    uint8_t* b_channel = upload(xc.codes);
    // B's group scales: token-major [n, k/128], group-major [k/128, n], group-major padded to 4 tokens.
    const int n4 = (n + 3) / 4 * 4;
    std::vector<float> g_major(static_cast<size_t>(kb) * n), g_padded(static_cast<size_t>(kb) * n4, 1.0f);
    for (int t = 0; t < n; ++t)
      for (int g = 0; g < kb; ++g) {
        g_major[g * n + t] = xq.scales[t * kb + g];
        g_padded[g * n4 + t] = xq.scales[t * kb + g];
      }
    float* sb_token = upload(xq.scales);
    float* sb_group = upload(g_major);
    float* sb_padded = upload(g_padded);
    float* sb_channel = upload(xc.scales);
    float* d = nullptr;
    CHECK_CUDA(cudaMalloc(&d, sizeof(float) * m * n));
    const struct {
      const char* name;
      const float* sa;
      const float* sb;
    } variants[] = {{"A out-block-major, B token-major", sa_rows, sb_token},
                    {"A out-block-major, B group-major", sa_rows, sb_group},
                    {"A out-block-major, B group-major padded", sa_rows, sb_padded},
                    {"A in-block-major, B token-major", sa_cols, sb_token},
                    {"A in-block-major, B group-major", sa_cols, sb_group},
                    {"A in-block-major, B group-major padded", sa_cols, sb_padded}};
    for (const auto& v : variants) {
      Gemm g = plan(lt, m, n, k, CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F, CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F,
                    v.sa, v.sb, workspace, workspace_bytes);
      if (!g.ok) {
        std::printf("  n=%-4d %-42s no algorithm\n", n, v.name);
        continue;
      }
      std::printf("  n=%-4d %-42s err %.2e\n", n, v.name,
                  run_error(lt, g, a, b, d, m, n, ref, workspace, workspace_bytes));
    }
    Gemm c = plan(lt, m, n, k, CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F, CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F,
                  sa_channel, sb_channel, workspace, workspace_bytes);
    std::printf("  n=%-4d %-42s %s %.2e\n", n, "per-channel x per-token (outer vectors)", c.ok ? "err" : "no algorithm",
                c.ok ? run_error(lt, c, a_channel, b_channel, d, m, n, ref_channel, workspace, workspace_bytes) : 0.0);
  }
  // Speed: gate_up of Qwen3-8B (m 24576, k 4096) at decode and prefill sizes, FP8 per-channel vs bf16 cuBLAS.
  std::printf("== speed: m 24576, k 4096 (Qwen3-8B gate_up), median of 15\n");
  const int M = 24576, K = 4096;
  std::vector<uint8_t> big_codes(static_cast<size_t>(M) * K);
  for (auto& c : big_codes) c = static_cast<uint8_t>(rng() & 0x77);
  uint8_t* A = upload(big_codes);
  std::vector<float> ones(std::max(M, 8192), 1.0f);
  float* s_ones = upload(ones);
  std::vector<float> block_ones(static_cast<size_t>(M / kBlock) * (K / kBlock) + 8192 * (K / kBlock), 1.0f);
  float* s_block = upload(block_ones);
  __nv_bfloat16* W16 = nullptr;
  CHECK_CUDA(cudaMalloc(&W16, sizeof(__nv_bfloat16) * M * K));
  CHECK_CUDA(cudaMemset(W16, 0, sizeof(__nv_bfloat16) * M * K));
  for (int n : {8, 32, 128, 4096}) {
    std::vector<uint8_t> bcodes(static_cast<size_t>(n) * K);
    for (auto& c : bcodes) c = static_cast<uint8_t>(rng() & 0x77);
    uint8_t* B = upload(bcodes);
    float* D = nullptr;
    __nv_bfloat16* X16 = nullptr;
    CHECK_CUDA(cudaMalloc(&D, sizeof(float) * M * n));
    CHECK_CUDA(cudaMalloc(&X16, sizeof(__nv_bfloat16) * n * K));
    CHECK_CUDA(cudaMemset(X16, 0, sizeof(__nv_bfloat16) * n * K));
    const float one = 1, zero = 0;
    Gemm ch = plan(lt, M, n, K, CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F, CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F,
                   s_ones, s_ones, workspace, workspace_bytes);
    Gemm bl = plan(lt, M, n, K, CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F, CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F,
                   s_block, s_block, workspace, workspace_bytes);
    const auto fp8 = [&](Gemm& g) {
      return g.ok ? time_ms([&] {
        cublasLtMatmul(lt, g.desc, &one, A, g.a, B, g.b, &zero, D, g.d, D, g.d, &g.algo, workspace, workspace_bytes,
                       nullptr);
      })
                  : -1.0f;
    };
    const float t_ch = fp8(ch), t_bl = fp8(bl);
    const float t_bf16 = time_ms([&] {
      cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, M, n, K, &one, W16, CUDA_R_16BF, K, X16, CUDA_R_16BF, K, &zero, D,
                   CUDA_R_32F, M, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    });
    const double flops = 2.0 * M * n * K, fp8_bytes = double(M) * K, bf16_bytes = 2.0 * M * K;
    const auto report = [&](const char* name, float ms, double bytes) {
      if (ms < 0) return std::printf("  n=%-5d %-22s no algorithm\n", n, name), void();
      std::printf("  n=%-5d %-22s %8.3f ms  %7.1f TFLOP/s  %6.0f GB/s of weights\n", n, name, ms, flops / ms / 1e9,
                  bytes / ms / 1e6);
    };
    report("fp8 per-channel", t_ch, fp8_bytes);
    report("fp8 128x128 blocks", t_bl, fp8_bytes);
    report("bf16 cublasGemmEx", t_bf16, bf16_bytes);
  }
  return 0;
}
