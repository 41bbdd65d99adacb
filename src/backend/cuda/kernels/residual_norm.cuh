// The residual add with the RMSNorm that follows it, for one row held by a block in float4s: every load of the row and
// of the weight issued before any result is needed, one block reduction. Shared by add_rms_norm's vectorised kernel
// and the decode GEMV whose last block finishes the layer's projection with it, so both give identical bits.
#pragma once

#include "backend/cuda/kernels/device_utils.cuh"

namespace rs::cuda {

// Rows of at most kNormVecThreads * kNormVecPerThread float4s (hidden sizes up to 16k).
constexpr int kNormVecThreads = 1024, kNormVecPerThread = 4;

// Threads (whole warps) a row of width4 float4s is spread over.
__host__ __device__ constexpr int norm_vec_threads(int64_t width4) {
  const int64_t threads = (width4 + kNormVecPerThread * 32 - 1) / (kNormVecPerThread * 32) * 32;
  return static_cast<int>(threads < kNormVecThreads ? threads : kNormVecThreads);
}

// Four consecutive elements of a norm weight from element 4 * i4 (16-byte aligned f32, 8-byte aligned bf16/f16).
__device__ __forceinline__ float4 load_weight4(const void* w, ElemType type, int i4) {
  if (type == ElemType::kF32) return __ldg(static_cast<const float4*>(w) + i4);
  const uint2 bits = __ldg(static_cast<const uint2*>(w) + i4);
  float4 f;
  if (type == ElemType::kBF16) {
    unpack_bf16x2(bits.x, f.x, f.y);
    unpack_bf16x2(bits.y, f.z, f.w);
  } else {
    unpack_f16x2(bits.x, f.x, f.y);
    unpack_f16x2(bits.y, f.z, f.w);
  }
  return f;
}

// Threads [0, threads) of the block own float4s threadIdx.x + k * threads; the others hold nothing (their zeros join
// the block sum exactly as absent warps do, so the bits do not depend on the block's size).
__device__ __forceinline__ void load_norm_weights(float4 (&w)[kNormVecPerThread], const void* weight, ElemType type,
                                                  int width4, int threads) {
#pragma unroll
  for (int k = 0; k < kNormVecPerThread; ++k) {
    const int i = threadIdx.x + k * threads;
    if (static_cast<int>(threadIdx.x) < threads && i < width4) w[k] = load_weight4(weight, type, i);
  }
}

// x += delta (stored; kAdd), out = x * rsqrt(mean(x^2) + eps) * (w + add_one). Every thread of the block calls it.
// kDeltaFromL2: delta was written by other blocks of this kernel (read past L1).
template <bool kAdd, bool kDeltaFromL2 = false>
__device__ __forceinline__ void add_rms_norm_row(float4* x, const float4* delta, const float4 (&w)[kNormVecPerThread],
                                                 int width4, int threads, float eps, bool add_one, float4* out) {
  const bool mine = static_cast<int>(threadIdx.x) < threads;
  float4 v[kNormVecPerThread];
#pragma unroll
  for (int k = 0; k < kNormVecPerThread; ++k) {
    const int i = threadIdx.x + k * threads;
    if (mine && i < width4) {
      const float4 a = x[i];
      if constexpr (kAdd) {
        const float4 b = kDeltaFromL2 ? __ldcg(delta + i) : delta[i];
        v[k] = make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
      } else {
        v[k] = a;
      }
    }
  }
  float sum = 0.0f;
#pragma unroll
  for (int k = 0; k < kNormVecPerThread; ++k) {
    const int i = threadIdx.x + k * threads;
    if (mine && i < width4) {
      if constexpr (kAdd) x[i] = v[k];
      sum += v[k].x * v[k].x + v[k].y * v[k].y + v[k].z * v[k].z + v[k].w * v[k].w;
    }
  }
  sum = block_sum(sum);
  const float scale = 1.0f / sqrtf(sum / static_cast<float>(4 * width4) + eps), one = add_one ? 1.0f : 0.0f;
#pragma unroll
  for (int k = 0; k < kNormVecPerThread; ++k) {
    const int i = threadIdx.x + k * threads;
    if (mine && i < width4) {
      const float4 a = v[k], g = w[k];
      out[i] = make_float4(a.x * scale * (g.x + one), a.y * scale * (g.y + one), a.z * scale * (g.z + one),
                           a.w * scale * (g.w + one));
    }
  }
}

}  // namespace rs::cuda
