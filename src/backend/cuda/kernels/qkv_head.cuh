// One q or k head of a fused q|k|v projection turned into an attention input by one warp: RMS-normed over the head
// (when a norm weight is given) and rotated NeoX-style over the first rotary_dim values, as rms_norm's warp-per-row
// path and rope() do (the same sums in the same order). Shared by qkv_prepare and the decode attention kernel that
// prepares its own q and k, so the two produce identical bits.
#pragma once

#include "backend/cuda/kernels/device_utils.cuh"

namespace rs::cuda {

// `in`: the head's head_dim raw values; `cos`/`sin`: this position's rotary_dim / 2 factors each (rotate false: an
// out-of-range position, left unrotated); `buf`: head_dim floats of shared memory owned by the warp. Calls
// emit(i, value) for i = lane, lane + 32, ... < head_dim.
template <typename Emit>
__device__ __forceinline__ void prepare_head(const float* in, int head_dim, const void* norm, ElemType norm_type,
                                             float eps, const float* cos, const float* sin, int rotary_dim, bool rotate,
                                             float* buf, Emit emit) {
  const int lane = threadIdx.x % 32, half = rotary_dim / 2;
  float scale = 1.0f;
  if (norm) {
    float sum = 0.0f;
    for (int i = lane; i < head_dim; i += 32) sum += in[i] * in[i];
    sum = warp_sum(sum);
    scale = 1.0f / sqrtf(sum / static_cast<float>(head_dim) + eps);
  }
  for (int i = lane; i < head_dim; i += 32) buf[i] = norm ? in[i] * scale * load_elem(norm, norm_type, i) : in[i];
  __syncwarp();
  for (int i = lane; i < head_dim; i += 32) {
    float v = buf[i];
    if (rotate && i < rotary_dim) {
      const int j = i < half ? i : i - half;
      const float x0 = buf[j], x1 = buf[j + half];
      v = i < half ? x0 * cos[j] - x1 * sin[j] : x1 * cos[j] + x0 * sin[j];
    }
    emit(i, v);
  }
  __syncwarp();  // buf may be reused by the warp's next head
}

// One KV cache element: f32 as is, bf16 rounded to nearest even, fp8 (uint8_t) as x / scale rounded to nearest e4m3
// and saturated to +-448 (f32_to_fp8_e4m3 on the CPU gives the same code).
template <typename CacheT>
__device__ __forceinline__ void store_cache(CacheT* p, float x, float scale) {
  if constexpr (sizeof(CacheT) == 1) {
    *p = __nv_cvt_float_to_fp8(x / scale, __NV_SATFINITE, __NV_E4M3);
  } else if constexpr (sizeof(CacheT) == 2) {
    *p = __bfloat16_as_ushort(__float2bfloat16_rn(x));
  } else {
    *p = x;
  }
}

}  // namespace rs::cuda
