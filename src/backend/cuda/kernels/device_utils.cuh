// Device helpers shared by the kernels: typed scalar loads, bf16/f16/MXFP4 decoding, warp and block reductions.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "backend/cuda/kernels/kernels.cuh"

namespace rs::cuda {

__device__ __forceinline__ float bf16_bits_to_float(uint32_t bits16) { return __uint_as_float(bits16 << 16); }

// Element i of a float-valued parameter stored as f32/bf16/f16.
__device__ __forceinline__ float load_elem(const void* base, ElemType type, int64_t i) {
  switch (type) {
    case ElemType::kBF16: return bf16_bits_to_float(static_cast<const uint16_t*>(base)[i]);
    case ElemType::kF16: return __half2float(static_cast<const __half*>(base)[i]);
    default: return static_cast<const float*>(base)[i];
  }
}

// Activation stores: f32, or bf16 rounded to nearest even (the rounding cuBLAS's bf16 inputs got from split_bf16, so
// a producer writing bf16 hands a GEMM exactly the values it saw before).
__device__ __forceinline__ void store_act(float* p, float v) { *p = v; }
__device__ __forceinline__ void store_act(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }
// Four consecutive values at p[4 * i4 ..]: 16-byte (f32) or 8-byte (bf16) aligned.
__device__ __forceinline__ void store_act4(float* p, int64_t i4, float4 v) { reinterpret_cast<float4*>(p)[i4] = v; }
__device__ __forceinline__ void store_act4(__nv_bfloat16* p, int64_t i4, float4 v) {
  const __nv_bfloat162 lo = __floats2bfloat162_rn(v.x, v.y), hi = __floats2bfloat162_rn(v.z, v.w);
  reinterpret_cast<uint2*>(p)[i4] =
      make_uint2(*reinterpret_cast<const uint32_t*>(&lo), *reinterpret_cast<const uint32_t*>(&hi));
}

// Two bf16 values packed in a 32-bit word -> floats (low element first, as stored).
__device__ __forceinline__ void unpack_bf16x2(uint32_t word, float& lo, float& hi) {
  lo = __uint_as_float(word << 16);
  hi = __uint_as_float(word & 0xffff0000u);
}

__device__ __forceinline__ void unpack_f16x2(uint32_t word, float& lo, float& hi) {
  const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&word));
  lo = f.x;
  hi = f.y;
}

// FP4 E2M1 code (4 bits) -> float: 0, .5, 1, 1.5, 2, 3, 4, 6 and bit 3 the sign.
__device__ __forceinline__ float fp4_e2m1_to_float(uint32_t code) {
  const uint32_t mag = code & 7u;
  const uint32_t bits = mag < 2 ? (mag ? 126u << 23 : 0u) : (((mag >> 1) + 126u) << 23) | ((mag & 1u) << 22);
  return __uint_as_float(bits | ((code & 8u) << 28));
}

// Four FP8 E4M3 codes of a word (byte i = element i) -> floats, exact (E4M3 is a subset of f16): the hardware's
// two-at-a-time e4m3 -> f16 conversion (one instruction on sm_89+), then f16 -> f32.
__device__ __forceinline__ void unpack_fp8x4(uint32_t word, float (&w)[4]) {
  const __half2 lo(__nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(word & 0xffffu), __NV_E4M3));
  const __half2 hi(__nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(word >> 16), __NV_E4M3));
  const float2 a = __half22float2(lo), b = __half22float2(hi);
  w[0] = a.x, w[1] = a.y, w[2] = b.x, w[3] = b.y;
}

// E8M0 scale byte -> 2^(e - 127) (e = 0 gives the subnormal 2^-127, as std::ldexp does on the host).
__device__ __forceinline__ float e8m0_to_float(uint32_t e) {
  return e ? __uint_as_float(e << 23) : __uint_as_float(0x00400000u);
}

// silu(g) * u, the SwiGLU product (one expression for the fused and unfused kernels: identical results).
__device__ __forceinline__ float silu_times(float g, float u) { return g / (1.0f + expf(-g)) * u; }

// gpt-oss clamped SwiGLU of one (gate, up) pair (one expression for the fused and unfused kernels).
__device__ __forceinline__ float clamped_swiglu(float gate, float up, float alpha, float limit) {
  gate = fminf(gate, limit);
  up = fminf(fmaxf(up, -limit), limit);
  return (up + 1.0f) * (gate / (1.0f + expf(-alpha * gate)));
}

__device__ __forceinline__ float pair_activation(PairActivation act, float gate, float up, float alpha, float limit) {
  return act == PairActivation::kClampedSwiGlu ? clamped_swiglu(gate, up, alpha, limit) : silu_times(gate, up);
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// Sum over a block of blockDim.x threads (a multiple of 32, at most 1024); every thread gets the result.
__device__ __forceinline__ float block_sum(float v) {
  __shared__ float partial[32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = warp_sum(v);
  __syncthreads();  // partial may still be read by a previous call
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  v = lane < warps ? partial[lane] : 0.0f;
  return warp_sum(v);
}

__device__ __forceinline__ void set_error(uint32_t* flags, uint32_t bit) {
  if (flags) atomicOr(flags, bit);
}

}  // namespace rs::cuda
