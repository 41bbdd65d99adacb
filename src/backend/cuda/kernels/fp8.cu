// FP8 beside cuBLAS: weights dequantized to bf16 (E4M3 codes times their block scales, rounded once) for a bf16 GEMM
// where cuBLASLt's FP8 GEMM does not apply, and activations quantized to E4M3 for the W8A8 GEMM where it does
// (fp8_gemm.cu). The GEMV reads FP8 weights directly (gemv.cu).
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <algorithm>

#include "backend/cuda/kernels/device_utils.cuh"
#include "backend/cuda/kernels/launch.cuh"

namespace rs::cuda {
namespace {

// One thread per 4 codes (one 32-bit word); in_features % 16 == 0, so a word never straddles a row or a scale block.
__global__ void dequantize_fp8_kernel(const uint32_t* codes, Fp8Scales scales, int64_t out_features,
                                      int64_t in_features, __nv_bfloat16* out) {
  pdl_wait();  // `out` is scratch that the previous GEMM may still read
  const int64_t words = out_features * in_features / 4;
  for (int64_t w = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; w < words;
       w += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t element = 4 * w, row = element / in_features, col = element % in_features;
    const float scale = scales.scales[(row / scales.block_rows) * scales.cols + ((col / 16) >> scales.vec_shift)];
    float values[4];
    unpack_fp8x4(codes[w], values);
#pragma unroll
    for (int i = 0; i < 4; ++i) out[element + i] = __float2bfloat16_rn(values[i] * scale);
  }
}

// One block per (group, row): the group's amax (block reduction), then its codes; float4 loads, a thread per 4..n
// values. The scale of (row, g) goes to scales[row * row_pitch + g * group_pitch].
__global__ void quantize_fp8_groups_kernel(const float* x, int64_t cols, int64_t group, uint8_t* codes, float* scales,
                                           int64_t row_pitch, int64_t group_pitch) {
  pdl_wait();
  const int64_t row = blockIdx.y, g = blockIdx.x;
  const float4* in = reinterpret_cast<const float4*>(x + row * cols + g * group);
  const int vectors = static_cast<int>(group / 4);
  float amax = 0.0f;
  for (int v = threadIdx.x; v < vectors; v += blockDim.x) {
    const float4 a = in[v];
    amax = fmaxf(amax, fmaxf(fmaxf(fabsf(a.x), fabsf(a.y)), fmaxf(fabsf(a.z), fabsf(a.w))));
  }
  __shared__ float warp_max[32];
  for (int offset = 16; offset > 0; offset /= 2) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, offset));
  if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = amax;
  __syncthreads();
  amax = 0.0f;
  for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w) amax = fmaxf(amax, warp_max[w]);
  const float scale = amax > 0.0f ? amax / 448.0f : 1.0f;
  if (threadIdx.x == 0) scales[row * row_pitch + g * group_pitch] = scale;
  uint32_t* out = reinterpret_cast<uint32_t*>(codes + row * cols + g * group);
  for (int v = threadIdx.x; v < vectors; v += blockDim.x) {
    const float4 a = in[v];
    const __nv_fp8x2_storage_t lo =
        __nv_cvt_float2_to_fp8x2(make_float2(a.x / scale, a.y / scale), __NV_SATFINITE, __NV_E4M3);
    const __nv_fp8x2_storage_t hi =
        __nv_cvt_float2_to_fp8x2(make_float2(a.z / scale, a.w / scale), __NV_SATFINITE, __NV_E4M3);
    out[v] = static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
  }
}

// out[r, c] = raw[r, c] * row_scales[r] * col_scales[c]; raw is f32 (may alias out) or bf16.
__global__ void scale_outer_kernel(const void* raw, bool raw_bf16, int64_t rows, int64_t cols, const float* row_scales,
                                   const float* col_scales, float* out) {
  pdl_wait();
  const int64_t count = rows * cols;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float value =
        raw_bf16 ? __bfloat162float(static_cast<const __nv_bfloat16*>(raw)[i]) : static_cast<const float*>(raw)[i];
    out[i] = value * row_scales[i / cols] * col_scales[i % cols];
  }
}

__global__ void widen_bf16_kernel(const __nv_bfloat16* in, int64_t count, float* out) {
  pdl_wait();
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = __bfloat162float(in[i]);
}

}  // namespace

void launch_quantize_fp8_groups(const float* x, int64_t rows, int64_t cols, int64_t group, uint8_t* codes,
                                float* scales, int64_t row_pitch, int64_t group_pitch, cudaStream_t stream) {
  if (rows == 0) return;
  // A thread per float4 up to 1,024 threads: a decode batch's few rows are latency-bound, so each row's pass is wide.
  const int threads = static_cast<int>(std::min<int64_t>(1024, (group / 4 + 31) / 32 * 32));
  launch_kernel(quantize_fp8_groups_kernel, dim3(static_cast<unsigned>(cols / group), static_cast<unsigned>(rows)),
                dim3(threads), 0, stream, x, cols, group, codes, scales, row_pitch, group_pitch);
}

void launch_scale_outer(const void* raw, bool raw_bf16, int64_t rows, int64_t cols, const float* row_scales,
                        const float* col_scales, float* out, cudaStream_t stream) {
  if (rows * cols == 0) return;
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(ceil_div(rows * cols, 256), 16384));
  launch_kernel(scale_outer_kernel, dim3(blocks), dim3(256), 0, stream, raw, raw_bf16, rows, cols, row_scales,
                col_scales, out);
}

void launch_widen_bf16(const void* in, int64_t count, float* out, cudaStream_t stream) {
  if (count == 0) return;
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(ceil_div(count, 256), 8192));
  launch_kernel(widen_bf16_kernel, dim3(blocks), dim3(256), 0, stream, static_cast<const __nv_bfloat16*>(in), count,
                out);
}

void launch_dequantize_fp8(const uint8_t* codes, const Fp8Scales& scales, int64_t out_features, int64_t in_features,
                           void* out_bf16, cudaStream_t stream) {
  const int64_t words = out_features * in_features / 4;
  if (words == 0) return;
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(ceil_div(words, 256), 8192));
  launch_kernel(dequantize_fp8_kernel, dim3(blocks), dim3(256), 0, stream, reinterpret_cast<const uint32_t*>(codes),
                scales, out_features, in_features, static_cast<__nv_bfloat16*>(out_bf16));
}

}  // namespace rs::cuda
