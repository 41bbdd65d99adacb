// Standalone GEMM lab (session 21): the dense bf16 GEMMs of one Qwen3-8B layer (and the 0.6B's) at prefill and mixed
// step sizes, through what the engine calls today (cublasGemmEx, CUBLAS_GEMM_DEFAULT, bf16 x, f32 out) against
// cuBLASLt: its heuristic's first choice, and the fastest of its first 16 candidates timed here (what "algorithms
// chosen once per shape and cached" would buy). Layout as the engine's: out^T [m = out features, n = tokens] =
// W [m, k] . x^T, W row-major bf16, x row-major bf16 [n, k], out f32 [n, m]. Reports us and TFLOP/s per GEMM, and the
// GEMM-only prefill bound per step size (4 GEMMs x layers).
//   nvcc -O3 -std=c++17 -arch=sm_90 -o gemm_lab gemm_lab.cu -lcublasLt -lcublas && ./gemm_lab [8b|0.6b]
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#define CK(x)                                                     \
  do {                                                            \
    cudaError_t e = (x);                                          \
    if (e != cudaSuccess) {                                       \
      printf("CUDA %s at %d\n", cudaGetErrorString(e), __LINE__); \
      exit(1);                                                    \
    }                                                             \
  } while (0)
#define CB(x)                                          \
  do {                                                 \
    int s = static_cast<int>(x);                       \
    if (s != 0) {                                      \
      printf("cuBLAS status %d at %d\n", s, __LINE__); \
      exit(1);                                         \
    }                                                  \
  } while (0)

__global__ void fill(__nv_bfloat16* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 15, h *= 2246822519u, h ^= h >> 13;
    p[i] = __float2bfloat16((static_cast<float>(h & 0xffff) / 65536.0f - 0.5f) * 0.05f);
  }
}

struct Shape {
  const char* name;
  int m, k;
};

constexpr size_t kWorkspace = size_t{32} << 20;
constexpr int kReps = 20;

template <class F>
float time_us(F&& run, cudaStream_t stream) {
  for (int i = 0; i < 3; ++i) run();
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  CK(cudaEventRecord(a, stream));
  for (int i = 0; i < kReps; ++i) run();
  CK(cudaEventRecord(b, stream));
  CK(cudaEventSynchronize(b));
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, a, b));
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  return ms * 1000.0f / kReps;
}

int main(int argc, char** argv) {
  const bool small = argc > 1 && std::strcmp(argv[1], "0.6b") == 0;
  // Qwen3-8B: hidden 4096, 32 q heads + 8 kv heads of 128, intermediate 12288, 36 layers. Qwen3-0.6B: hidden 1024,
  // 16 + 8 heads of 128, intermediate 3072, 28 layers.
  const std::vector<Shape> shapes =
      small
          ? std::vector<Shape>{{"qkv", 4096, 1024}, {"o", 1024, 2048}, {"gate_up", 6144, 1024}, {"down", 1024, 3072}}
          : std::vector<Shape>{{"qkv", 6144, 4096}, {"o", 4096, 4096}, {"gate_up", 24576, 4096}, {"down", 4096, 12288}};
  const int layers = small ? 28 : 36;
  const std::vector<int> ns = {128, 256, 512, 640, 1024, 2048, 4096, 8192};
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  printf("device %s, %d SMs, model %s\n", prop.name, prop.multiProcessorCount, small ? "Qwen3-0.6B" : "Qwen3-8B");

  cudaStream_t stream;
  CK(cudaStreamCreate(&stream));
  cublasHandle_t blas;
  CB(cublasCreate(&blas));
  CB(cublasSetStream(blas, stream));
  void* workspace;
  CK(cudaMalloc(&workspace, kWorkspace));
  CB(cublasSetWorkspace(blas, workspace, kWorkspace));
  cublasLtHandle_t lt;
  CB(cublasLtCreate(&lt));

  size_t max_w = 0, max_x = 0, max_out = 0;
  for (const Shape& s : shapes) {
    max_w = std::max(max_w, size_t(s.m) * s.k);
    max_x = std::max(max_x, size_t(ns.back()) * s.k);
    max_out = std::max(max_out, size_t(ns.back()) * s.m);
  }
  __nv_bfloat16 *w, *x;
  float* out;
  CK(cudaMalloc(&w, max_w * 2));
  CK(cudaMalloc(&x, max_x * 2));
  CK(cudaMalloc(&out, max_out * 4));
  fill<<<1024, 256, 0, stream>>>(w, max_w, 1);
  fill<<<1024, 256, 0, stream>>>(x, max_x, 2);
  CK(cudaStreamSynchronize(stream));

  printf("%-8s %6s %6s %6s | %9s %7s | %9s %7s | %9s %7s %4s\n", "gemm", "m", "k", "n", "gemmEx us", "TF/s", "lt-top1",
         "TF/s", "lt-best", "TF/s", "idx");
  std::vector<double> step_ex(ns.size()), step_best(ns.size());
  for (size_t ni = 0; ni < ns.size(); ++ni) {
    const int n = ns[ni];
    for (const Shape& s : shapes) {
      const int m = s.m, k = s.k;
      const float one = 1.0f, zero = 0.0f;
      const double flop = 2.0 * m * n * k;
      const float ex_us = time_us(
          [&] {
            CB(cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one, w, CUDA_R_16BF, k, x, CUDA_R_16BF, k, &zero,
                            out, CUDA_R_32F, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
          },
          stream);

      cublasLtMatmulDesc_t desc;
      CB(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
      const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
      CB(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
      CB(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
      cublasLtMatrixLayout_t la, lb, lc;
      CB(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, k, m, k));
      CB(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, k, n, k));
      CB(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, m, n, m));
      cublasLtMatmulPreference_t pref;
      CB(cublasLtMatmulPreferenceCreate(&pref));
      CB(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &kWorkspace,
                                              sizeof(kWorkspace)));
      cublasLtMatmulHeuristicResult_t results[16];
      int count = 0;
      CB(cublasLtMatmulAlgoGetHeuristic(lt, desc, la, lb, lc, lc, pref, 16, results, &count));
      float top1 = -1, best = 1e30f;
      int best_index = -1;
      for (int i = 0; i < count; ++i) {
        if (results[i].state != CUBLAS_STATUS_SUCCESS) continue;
        const float us = time_us(
            [&] {
              CB(cublasLtMatmul(lt, desc, &one, w, la, x, lb, &zero, out, lc, out, lc, &results[i].algo, workspace,
                                kWorkspace, stream));
            },
            stream);
        if (i == 0) top1 = us;
        if (us < best) best = us, best_index = i;
      }
      step_ex[ni] += ex_us;
      step_best[ni] += std::min(best, ex_us);
      printf("%-8s %6d %6d %6d | %9.1f %7.1f | %9.1f %7.1f | %9.1f %7.1f %4d\n", s.name, m, k, n, ex_us,
             flop / ex_us * 1e-6, top1, flop / top1 * 1e-6, best, flop / best * 1e-6, best_index);
      cublasLtMatmulPreferenceDestroy(pref);
      cublasLtMatrixLayoutDestroy(la), cublasLtMatrixLayoutDestroy(lb), cublasLtMatrixLayoutDestroy(lc);
      cublasLtMatmulDescDestroy(desc);
    }
  }
  printf("\nGEMM-only prefill bound (4 GEMMs x %d layers, no attention, LM head or elementwise):\n", layers);
  printf("%6s | %12s %10s | %12s %10s\n", "n", "gemmEx ms", "tok/s", "best ms", "tok/s");
  for (size_t ni = 0; ni < ns.size(); ++ni)
    printf("%6d | %12.2f %10.0f | %12.2f %10.0f\n", ns[ni], step_ex[ni] * layers / 1000,
           ns[ni] / (step_ex[ni] * layers * 1e-6), step_best[ni] * layers / 1000,
           ns[ni] / (step_best[ni] * layers * 1e-6));
  return 0;
}
