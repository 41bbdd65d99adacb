// Decoding of linear-weight storage formats (f32, bf16, f16, MXFP4, FP8) one 32-bit word at a time, shared by the GEMV
// and tiled GEMM kernels. MXFP4: 32 elements per 16-byte block, byte k holds element 2k (low nibble) and 2k+1 (high).
// FP8: E4M3 codes, byte k of a word is element k; block scales are applied per 16-element vector. kInt4 / kInt8: the
// unsigned codes themselves (scale and bias are applied per vector by the kernels); int4 byte k holds element 2k in its
// low nibble and 2k + 1 in its high one.
#pragma once

#include "backend/cuda/kernels/device_utils.cuh"

namespace rs::cuda {

template <WeightFormat F>
struct WeightTraits {
  static constexpr int kPerWord =
      F == WeightFormat::kF32                                                                  ? 1
      : F == WeightFormat::kMxfp4 || F == WeightFormat::kInt4 || F == WeightFormat::kInt4Tiled ? 8
      : F == WeightFormat::kFp8 || F == WeightFormat::kInt8                                    ? 4
                                                                                               : 2;  // per 32-bit word
  static constexpr int kPerVec = 4 * kPerWord;                    // elements per 16-byte vector
};

template <WeightFormat F>
constexpr bool kAffineFormat = F == WeightFormat::kInt4 || F == WeightFormat::kInt8 || F == WeightFormat::kInt4Tiled;

// Byte k of `word` (a value below 256) as a float: the byte becomes the low mantissa bits of 2^23, one PRMT and one
// FADD (cheaper than an integer conversion).
__device__ __forceinline__ float byte_to_float(uint32_t word, int k) {
  return __uint_as_float(__byte_perm(word, 0x4B000000u, 0x7540u | static_cast<uint32_t>(k))) - 8388608.0f;
}

template <WeightFormat F>
__device__ __forceinline__ void decode_word(uint32_t word, float (&w)[WeightTraits<F>::kPerWord]) {
  if constexpr (F == WeightFormat::kF32) {
    w[0] = __uint_as_float(word);
  } else if constexpr (F == WeightFormat::kBF16) {
    unpack_bf16x2(word, w[0], w[1]);
  } else if constexpr (F == WeightFormat::kF16) {
    unpack_f16x2(word, w[0], w[1]);
  } else if constexpr (F == WeightFormat::kFp8) {
    unpack_fp8x4(word, w);
  } else if constexpr (F == WeightFormat::kInt8) {
#pragma unroll
    for (int k = 0; k < 4; ++k) w[k] = byte_to_float(word, k);
  } else if constexpr (F == WeightFormat::kInt4 || F == WeightFormat::kInt4Tiled) {
    const uint32_t lo = word & 0x0F0F0F0Fu, hi = (word >> 4) & 0x0F0F0F0Fu;
#pragma unroll
    for (int k = 0; k < 4; ++k) w[2 * k] = byte_to_float(lo, k), w[2 * k + 1] = byte_to_float(hi, k);
  } else {
#pragma unroll
    for (int i = 0; i < 8; ++i) w[i] = fp4_e2m1_to_float(word >> (4 * i));
  }
}

// Loads N consecutive floats (N = 1, 2, 4 or 8; p aligned to 4 * N bytes, at most 16).
template <int N>
__device__ __forceinline__ void load_floats(const float* p, float (&x)[N]) {
  if constexpr (N == 1) {
    x[0] = *p;
  } else if constexpr (N == 2) {
    const float2 v = *reinterpret_cast<const float2*>(p);
    x[0] = v.x, x[1] = v.y;
  } else if constexpr (N == 4) {
    const float4 a = *reinterpret_cast<const float4*>(p);
    x[0] = a.x, x[1] = a.y, x[2] = a.z, x[3] = a.w;
  } else {
    static_assert(N == 8);
    const float4 a = reinterpret_cast<const float4*>(p)[0], b = reinterpret_cast<const float4*>(p)[1];
    x[0] = a.x, x[1] = a.y, x[2] = a.z, x[3] = a.w, x[4] = b.x, x[5] = b.y, x[6] = b.z, x[7] = b.w;
  }
}

// The (group, first row, row count) of this block's chunk of activation rows; false when the block has none.
__device__ __forceinline__ bool block_chunk(const RowChunks& rows, int& group, int64_t& first_row, int& count) {
  if (rows.list) {
    if (static_cast<int>(blockIdx.y) >= *rows.count) return false;
    const int4 c = rows.list[blockIdx.y];
    group = c.x, first_row = c.y, count = c.z;
  } else {
    group = 0;
    first_row = static_cast<int64_t>(blockIdx.y) * rows.chunk_rows;
    count = static_cast<int>(
        min(static_cast<long long>(rows.chunk_rows), static_cast<long long>(rows.total_rows - first_row)));
  }
  return count > 0;
}

__device__ __forceinline__ const void* group_weight(const GroupedWeights& w, int group) {
  return w.weight_table ? w.weight_table[group] : w.weight;
}
__device__ __forceinline__ const uint8_t* group_scales(const GroupedWeights& w, int group) {
  return w.scale_table ? w.scale_table[group] : w.scales;
}
__device__ __forceinline__ float group_bias(const GroupedWeights& w, int group, int64_t feature) {
  return w.bias ? load_elem(w.bias, w.bias_type, group * w.bias_group_stride + feature) : 0.0f;
}

}  // namespace rs::cuda
