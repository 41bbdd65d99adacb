// Tiled SIMT GEMM for any row count and any weight format: 64 activation rows x 64 output features per block, K in
// steps of 32 (one MXFP4 block), weights decoded to f32 in shared memory, f32 FMA (exact products of the decoded
// weights, so results match the CPU reference up to summation order). Used for MXFP4/f16 prefill and MoE experts;
// dense bf16/f32 prefill goes to cuBLAS instead. A tensor-core grouped GEMM is the production replacement.
#include <type_traits>

#include "backend/cuda/cuda_check.cuh"
#include "backend/cuda/kernels/launch.cuh"
#include "backend/cuda/kernels/weight_decode.cuh"

namespace rs::cuda {
namespace {

constexpr int kBM = kTiledRows, kBN = 64, kBK = 32, kThreads = 256;

// Elements [k, k + 8) of weight row n as floats (zero past in_features).
template <WeightFormat F>
__device__ __forceinline__ void load_weight8(const void* weight, const uint8_t* scales, int64_t n, int64_t in,
                                             int64_t k, float (&w)[8]) {
  if constexpr (F == WeightFormat::kMxfp4) {  // in % 32 == 0 and k % 8 == 0: one aligned word of 8 nibbles
    const uint32_t word =
        *reinterpret_cast<const uint32_t*>(static_cast<const uint8_t*>(weight) + n * (in / 2) + k / 2);
    const float scale = e8m0_to_float(scales[n * (in / 32) + k / 32]);
    decode_word<F>(word, w);
#pragma unroll
    for (int e = 0; e < 8; ++e) w[e] *= scale;
  } else {
    using Elem = std::conditional_t<F == WeightFormat::kF32, float, uint16_t>;
    const Elem* row = static_cast<const Elem*>(weight) + n * in;
    if constexpr (F != WeightFormat::kF32) {
      if (k + 8 <= in && reinterpret_cast<uintptr_t>(row + k) % 16 == 0) {
        const uint4 raw = *reinterpret_cast<const uint4*>(row + k);
        const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          float pair[2];
          decode_word<F>(words[i], pair);
          w[2 * i] = pair[0], w[2 * i + 1] = pair[1];
        }
        return;
      }
    }
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      if (k + e >= in) {
        w[e] = 0.0f;
      } else if constexpr (F == WeightFormat::kF32) {
        w[e] = row[k + e];
      } else if constexpr (F == WeightFormat::kBF16) {
        w[e] = bf16_bits_to_float(row[k + e]);
      } else {
        w[e] = __half2float(__ushort_as_half(row[k + e]));
      }
    }
  }
}

template <WeightFormat F>
__global__ void __launch_bounds__(kThreads) gemm_tiled_kernel(LinearArgs a) {
  pdl_enter();
  __shared__ __align__(16) float xs[kBK][kBM + 4];
  __shared__ __align__(16) float ws[kBK][kBN + 4];
  int group, count;
  int64_t first_row;
  if (!block_chunk(a.rows, group, first_row, count)) return;
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kBN;
  const int64_t in = a.in_features;
  const void* weight = group_weight(a.w, group);
  const uint8_t* scales = F == WeightFormat::kMxfp4 ? group_scales(a.w, group) : nullptr;

  // Loader mapping: row/feature lr, 8 consecutive k from lk.
  const int lr = tid / 4, lk = (tid % 4) * 8;
  const float* x_row = nullptr;
  if (lr < count) {
    const int64_t r = first_row + lr;
    x_row = a.x + (a.x_rows ? a.x_rows[r] : r) * a.x_stride;
  }
  const int64_t n_load = n0 + lr;
  const bool n_valid = n_load < a.out_features;

  float acc[4][4] = {};
  for (int64_t k0 = 0; k0 < in; k0 += kBK) {
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const int64_t k = k0 + lk + e;
      xs[lk + e][lr] = x_row && k < in ? x_row[k] : 0.0f;
    }
    float wv[8];
    if (n_valid) {
      load_weight8<F>(weight, scales, n_load, in, k0 + lk, wv);
    } else {
#pragma unroll
      for (int e = 0; e < 8; ++e) wv[e] = 0.0f;
    }
#pragma unroll
    for (int e = 0; e < 8; ++e) ws[lk + e][lr] = wv[e];
    __syncthreads();
#pragma unroll 8
    for (int k = 0; k < kBK; ++k) {
      const float4 xv = *reinterpret_cast<const float4*>(&xs[k][ty * 4]);
      const float4 wv4 = *reinterpret_cast<const float4*>(&ws[k][tx * 4]);
      const float xa[4] = {xv.x, xv.y, xv.z, xv.w}, wa[4] = {wv4.x, wv4.y, wv4.z, wv4.w};
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(xa[i], wa[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int row = ty * 4 + i;
    if (row >= count) break;
    float* out = a.out + (first_row + row) * a.out_stride;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t n = n0 + tx * 4 + j;
      if (n < a.out_features) out[n] = acc[i][j] + group_bias(a.w, group, n);
    }
  }
}

template <WeightFormat F>
void launch_for_format(const LinearArgs& a, cudaStream_t stream) {
  const dim3 grid(
      static_cast<unsigned>(ceil_div(a.out_features, kBN)),
      static_cast<unsigned>(a.rows.list ? a.rows.max_chunks : ceil_div(a.rows.total_rows, a.rows.chunk_rows)));
  launch_kernel(gemm_tiled_kernel<F>, grid, kThreads, 0, stream, a);
}

}  // namespace

void launch_gemm_tiled(const LinearArgs& a, cudaStream_t stream) {
  RS_CHECK(a.rows.chunk_rows <= kTiledRows, "tiled GEMM chunk of {} rows", a.rows.chunk_rows);
  RS_CHECK(a.format != WeightFormat::kMxfp4 || a.in_features % 32 == 0, "MXFP4 in_features {} not a multiple of 32",
           a.in_features);
  if (a.out_features == 0) return;
  switch (a.format) {
    case WeightFormat::kF32: return launch_for_format<WeightFormat::kF32>(a, stream);
    case WeightFormat::kBF16: return launch_for_format<WeightFormat::kBF16>(a, stream);
    case WeightFormat::kF16: return launch_for_format<WeightFormat::kF16>(a, stream);
    case WeightFormat::kMxfp4: return launch_for_format<WeightFormat::kMxfp4>(a, stream);
    case WeightFormat::kFp8: RS_FAIL("the tiled GEMM does not read FP8 weights (the GEMV and cuBLAS do)");
    case WeightFormat::kInt4:
    case WeightFormat::kInt4Tiled:
    case WeightFormat::kInt8: RS_FAIL("the tiled GEMM does not read integer weights (the GEMV and cuBLAS do)");
  }
}

}  // namespace rs::cuda
