// Integer weights (LinearWeight::kAffine: MLX, AWQ, GPTQ) beside cuBLAS: dequantized to bf16 (or f32 in exact mode)
// for a GEMM over many rows. The GEMV reads the codes directly (gemv.cu).
#include <cuda_bf16.h>

#include <algorithm>

#include "backend/cuda/cuda_check.cuh"
#include "backend/cuda/kernels/device_utils.cuh"
#include "backend/cuda/kernels/launch.cuh"

namespace rs::cuda {
namespace {

// The plain byte (two int4 codes) that byte `b` of a kInt4Tiled row holds (see launch_tile_int4): plain element index
// of its low nibble.
__device__ __forceinline__ uint32_t tiled_first_element(uint32_t b) {
  const uint32_t tile = b >> 9, lane = (b >> 4) & 31, word = (b >> 2) & 3, k = b & 3;
  return tile * 1024 + word * 256 + (k >> 1) * 128 + lane * 4 + 2 * (k & 1);
}

__global__ void embedding_affine_kernel(const uint8_t* codes, const float2* pairs, int32_t bits, int64_t group,
                                        int64_t vocab, int64_t in, const int32_t* ids, float* out,
                                        uint32_t* error_flags) {
  pdl_enter();
  const int64_t t = blockIdx.x;
  const int32_t id = ids[t];
  const bool valid = id >= 0 && id < vocab;
  if (!valid && threadIdx.x == 0) set_error(error_flags, kErrTokenId);
  const uint8_t* row = codes + (valid ? id : 0) * (in * bits / 8);
  const float2* row_pairs = pairs + (valid ? id : 0) * (in / group);
  const uint32_t mask = (1u << bits) - 1;
  for (int64_t i = threadIdx.x; i < in; i += blockDim.x) {
    const int64_t bit = i * bits;
    const float2 pair = row_pairs[i / group];
    const float q = static_cast<float>((row[bit >> 3] >> (bit & 7)) & mask);
    out[t * in + i] = valid ? fmaf(pair.x, q, pair.y) : 0.0f;  // s q is exact: one rounding, as the reference
  }
}

__global__ void gather_columns_kernel(const float* x, int64_t cols, int64_t x_stride, const int32_t* order,
                                      float* out) {
  pdl_wait();
  const int64_t row = blockIdx.x;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) out[row * cols + c] = x[row * x_stride + order[c]];
}

__global__ void tile_int4_kernel(const uint8_t* codes, uint32_t row_bytes, uint8_t* tiled) {
  pdl_wait();
  const int64_t row = blockIdx.x;
  for (uint32_t b = threadIdx.x; b < row_bytes; b += blockDim.x)
    tiled[row * row_bytes + b] = codes[row * row_bytes + tiled_first_element(b) / 2];
}

// One block per weight row, a thread per code byte (2 int4, 1 int8 or 4 int2 elements; a group holds whole bytes).
// 32-bit index arithmetic: a 64-bit division per element made this kernel 5x slower than its memory traffic.
template <int kBits, bool kF32, bool kTiled>
__global__ void dequantize_affine_kernel(const uint8_t* codes, const float2* pairs, uint32_t group, uint32_t groups,
                                         uint32_t in_features, void* out) {
  pdl_wait();  // `out` is scratch that the previous GEMM may still read
  constexpr uint32_t kPerByte = 8 / kBits, kMask = (1u << kBits) - 1;
  const int64_t row = blockIdx.x;
  const uint32_t row_bytes = in_features / kPerByte;
  const uint8_t* row_codes = codes + row * row_bytes;
  const float2* row_pairs = pairs + row * groups;
  for (uint32_t b = threadIdx.x; b < row_bytes; b += blockDim.x) {
    const uint32_t byte = row_codes[b], first = kTiled ? tiled_first_element(b) : b * kPerByte;
    const float2 pair = row_pairs[first / group];
    float values[kPerByte];
#pragma unroll
    for (uint32_t i = 0; i < kPerByte; ++i)
      values[i] = fmaf(pair.x, static_cast<float>((byte >> (i * kBits)) & kMask), pair.y);  // s q exact: one rounding
    const int64_t at = row * in_features + first;
#pragma unroll
    for (uint32_t i = 0; i < kPerByte; ++i) {
      if constexpr (kF32)
        static_cast<float*>(out)[at + i] = values[i];
      else
        static_cast<__nv_bfloat16*>(out)[at + i] = __float2bfloat16_rn(values[i]);
    }
  }
}

// int4, a thread per 32-bit word of codes (8 elements; power-of-two groups of at least 8): one (scale, bias) pair per
// run of contiguous elements, shifts instead of divisions, 16-byte stores. Plain layout: one run of 8; kInt4Tiled: two
// runs of 4 (tiled_first_element).
template <bool kF32, bool kTiled>
__global__ void dequantize_int4_words_kernel(const uint32_t* codes, const float2* pairs, uint32_t group_shift,
                                             uint32_t groups, uint32_t in_features, void* out) {
  pdl_wait();
  const int64_t row = blockIdx.x;
  const uint32_t row_words = in_features / 8;
  for (uint32_t w = threadIdx.x; w < row_words; w += blockDim.x) {
    const uint32_t word = codes[row * row_words + w];
    constexpr int kRuns = kTiled ? 2 : 1, kRun = 8 / kRuns;
#pragma unroll
    for (int r = 0; r < kRuns; ++r) {
      const uint32_t first = kTiled ? tiled_first_element(4 * w + 2 * r) : 8 * w;
      const float2 pair = pairs[row * groups + (first >> group_shift)];
      const uint32_t bits = word >> (16 * r * kTiled);
      float v[kRun];
#pragma unroll
      for (int i = 0; i < kRun; ++i) v[i] = fmaf(pair.x, static_cast<float>((bits >> (4 * i)) & 15u), pair.y);
      const int64_t at = row * in_features + first;
      if constexpr (kF32) {
#pragma unroll
        for (int i = 0; i < kRun; i += 4)
          *reinterpret_cast<float4*>(static_cast<float*>(out) + at + i) =
              make_float4(v[i], v[i + 1], v[i + 2], v[i + 3]);
      } else {
        __nv_bfloat162 h[kRun / 2];
#pragma unroll
        for (int i = 0; i < kRun / 2; ++i) h[i] = __floats2bfloat162_rn(v[2 * i], v[2 * i + 1]);
        __nv_bfloat16* dst = static_cast<__nv_bfloat16*>(out) + at;
        if constexpr (kRun == 8)
          *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(h);
        else
          *reinterpret_cast<uint2*>(dst) = *reinterpret_cast<const uint2*>(h);
      }
    }
  }
}

template <int kBits, bool kTiled = false>
void launch_bits(const uint8_t* codes, const float2* pairs, int64_t group, int64_t out_features, int64_t in_features,
                 void* out, bool out_f32, cudaStream_t stream) {
  const auto g = static_cast<uint32_t>(group), groups = static_cast<uint32_t>(in_features / group);
  const auto in = static_cast<uint32_t>(in_features);
  const dim3 grid(static_cast<unsigned>(out_features));
  if (out_f32)
    launch_kernel(dequantize_affine_kernel<kBits, true, kTiled>, grid, 256, 0, stream, codes, pairs, g, groups, in,
                  out);
  else
    launch_kernel(dequantize_affine_kernel<kBits, false, kTiled>, grid, 256, 0, stream, codes, pairs, g, groups, in,
                  out);
}

}  // namespace

void launch_embedding_affine(const uint8_t* codes, const float* pairs, int32_t bits, int64_t group, int64_t vocab,
                             int64_t in_features, const int32_t* ids, int64_t num_tokens, float* out,
                             uint32_t* error_flags, cudaStream_t stream) {
  if (num_tokens == 0) return;
  launch_kernel(embedding_affine_kernel, dim3(static_cast<unsigned>(num_tokens)), 256, 0, stream, codes,
                reinterpret_cast<const float2*>(pairs), bits, group, vocab, in_features, ids, out, error_flags);
}

void launch_gather_columns(const float* x, int64_t rows, int64_t cols, int64_t x_stride, const int32_t* order,
                           float* out, cudaStream_t stream) {
  if (rows == 0 || cols == 0) return;
  launch_kernel(gather_columns_kernel, dim3(static_cast<unsigned>(rows)), 256, 0, stream, x, cols, x_stride, order,
                out);
}

void launch_tile_int4(const uint8_t* codes, int64_t out_features, int64_t in_features, uint8_t* tiled,
                      cudaStream_t stream) {
  RS_CHECK(in_features % 1024 == 0 && in_features < (int64_t{1} << 31), "int4 tiles need in % 1024 == 0, got {}",
           in_features);
  if (out_features == 0) return;
  launch_kernel(tile_int4_kernel, dim3(static_cast<unsigned>(out_features)), 256, 0, stream, codes,
                static_cast<uint32_t>(in_features / 2), tiled);
}

void launch_dequantize_affine(const uint8_t* codes, const float* pairs, int32_t bits, int64_t group,
                              int64_t out_features, int64_t in_features, void* out, bool out_f32, bool tiled,
                              cudaStream_t stream) {
  RS_CHECK(in_features < (int64_t{1} << 31) && group > 0 && in_features % group == 0 && (group * bits) % 8 == 0,
           "integer weight of {} inputs in groups of {} at {} bits", in_features, group, bits);
  if (out_features == 0 || in_features == 0) return;
  const auto* p = reinterpret_cast<const float2*>(pairs);
  switch (bits) {
    case 2: return launch_bits<2>(codes, p, group, out_features, in_features, out, out_f32, stream);
    case 4: {
      if ((group & (group - 1)) == 0 && group >= 8 && in_features % 8 == 0 &&
          reinterpret_cast<uintptr_t>(codes) % 4 == 0 && reinterpret_cast<uintptr_t>(out) % 16 == 0) {
        const auto shift = static_cast<uint32_t>(__builtin_ctzll(static_cast<uint64_t>(group)));
        const auto groups = static_cast<uint32_t>(in_features / group), in = static_cast<uint32_t>(in_features);
        const auto* words = reinterpret_cast<const uint32_t*>(codes);
        const dim3 grid(static_cast<unsigned>(out_features));
        if (out_f32 && tiled)
          return launch_kernel(dequantize_int4_words_kernel<true, true>, grid, 256, 0, stream, words, p, shift, groups,
                               in, out);
        if (out_f32)
          return launch_kernel(dequantize_int4_words_kernel<true, false>, grid, 256, 0, stream, words, p, shift, groups,
                               in, out);
        if (tiled)
          return launch_kernel(dequantize_int4_words_kernel<false, true>, grid, 256, 0, stream, words, p, shift, groups,
                               in, out);
        return launch_kernel(dequantize_int4_words_kernel<false, false>, grid, 256, 0, stream, words, p, shift, groups,
                             in, out);
      }
      if (tiled) return launch_bits<4, true>(codes, p, group, out_features, in_features, out, out_f32, stream);
      return launch_bits<4>(codes, p, group, out_features, in_features, out, out_f32, stream);
    }
    case 8: return launch_bits<8>(codes, p, group, out_features, in_features, out, out_f32, stream);
    default: RS_FAIL("integer weights of {} bits", bits);
  }
}

}  // namespace rs::cuda
