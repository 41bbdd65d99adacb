// Paged causal attention on CUDA (f32, bf16 or fp8 e4m3 KV cache) with per-layer sliding window and per-head sinks, and
// the K/V store. One block of 4 warps per (token, head, key split). Each lane scores one key of a 32-key tile (its own
// cache row), the warp keeps an online softmax, and P.V is accumulated with each lane owning head_dim/32 output dims
// (coalesced V reads). Warps are merged in shared memory; with several key splits (flash-decoding, for few long
// sequences) a second kernel merges the splits and adds the sink term.
#include <algorithm>
#include <climits>
#include <cmath>

#include "backend/cuda/cuda_check.cuh"
#include "backend/cuda/kernels/device_utils.cuh"
#include "backend/cuda/kernels/launch.cuh"
#include "backend/cuda/kernels/qkv_head.cuh"

namespace rs::cuda {
namespace {

constexpr int kWarps = 4;

// Cache element access: f32 as is, bf16 as raw bits (rounded to nearest even when stored), fp8 as its e4m3 code's
// value (the per-tensor scales multiply the scores and the output instead).
__device__ __forceinline__ float cache_load(const float* p) { return *p; }
__device__ __forceinline__ float cache_load(const uint16_t* p) { return bf16_bits_to_float(*p); }
__device__ __forceinline__ float cache_load(const uint8_t* p) {
  return __half2float(__half(__nv_cvt_fp8_to_halfraw(*p, __NV_E4M3)));
}
// A bf16 cache runs the products in bf16 (as the CPU backend and transformers' bf16 attention): q and the
// probabilities are rounded to bf16 before they multiply K and V; sums stay f32. An fp8 cache computes in f32 on the
// exactly dequantized values, as the CPU does (the reference path; the tensor-core kernel rounds as for bf16).
__device__ __forceinline__ float product_operand(float x, const float*) { return x; }
__device__ __forceinline__ float product_operand(float x, const uint8_t*) { return x; }
__device__ __forceinline__ float product_operand(float x, const uint16_t*) {
  return __bfloat162float(__float2bfloat16_rn(x));
}
// Four consecutive cache elements (16-byte aligned for f32, 8-byte for bf16: head_dim % 4 == 0).
__device__ __forceinline__ float4 cache_load4(const float* p) { return *reinterpret_cast<const float4*>(p); }
__device__ __forceinline__ float4 cache_load4(const uint16_t* p) {
  const uint2 w = *reinterpret_cast<const uint2*>(p);
  float4 f;
  unpack_bf16x2(w.x, f.x, f.y);
  unpack_bf16x2(w.y, f.z, f.w);
  return f;
}
__device__ __forceinline__ float4 cache_load4(const uint8_t* p) {
  float w[4];
  unpack_fp8x4(*reinterpret_cast<const uint32_t*>(p), w);
  return make_float4(w[0], w[1], w[2], w[3]);
}

template <typename CacheT>
__device__ __forceinline__ const CacheT* a_cache_tag() {
  return nullptr;
}

template <typename CacheT>
__global__ void store_kv_kernel(const float* k, const float* v, int64_t row_width, const int32_t* slots,
                                int64_t cache_rows, CacheT* k_cache, CacheT* v_cache, float k_scale, float v_scale,
                                uint32_t* error_flags) {
  pdl_enter();
  const int64_t t = blockIdx.x;
  const int64_t slot = slots[t];
  if (slot < 0) return;
  if (slot >= cache_rows) {
    if (threadIdx.x == 0) set_error(error_flags, kErrKvSlot);
    return;
  }
  for (int64_t i = threadIdx.x; i < row_width; i += blockDim.x) {
    store_cache(k_cache + slot * row_width + i, k[t * row_width + i], k_scale);
    store_cache(v_cache + slot * row_width + i, v[t * row_width + i], v_scale);
  }
}

template <int kDimsPerLane, typename CacheT>
__global__ void __launch_bounds__(kWarps * 32) attention_kernel(AttentionArgs a) {
  pdl_enter();
  extern __shared__ float4 smem4[];
  float* smem = reinterpret_cast<float*>(smem4);
  const int t = blockIdx.x, h = blockIdx.y, split = blockIdx.z;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int hd = a.head_dim;
  const int kvh = h / (a.num_heads / a.num_kv_heads);
  const int pos = a.positions[t];
  const int first = a.window > 0 ? max(0, pos - a.window + 1) : 0;
  // This token's keys [first, pos] are cut into `splits` ranges of a multiple of 32 keys (sized from the token's own
  // range, so the grid can be fixed for a CUDA graph while lengths change); trailing splits may be empty.
  const int split_keys = (((pos + 1 - first) + a.splits - 1) / a.splits + 31) & ~31;
  const int begin = min(first + split * split_keys, pos + 1);
  const int end = min(pos + 1, begin + split_keys);

  const int q_floats = (hd + 3) & ~3;
  float* q_s = smem;
  const float* q = a.q + (static_cast<int64_t>(t) * a.num_heads + h) * hd;
  for (int d = threadIdx.x; d < hd; d += blockDim.x) q_s[d] = product_operand(q[d], a_cache_tag<CacheT>());
  __syncthreads();

  const int32_t* pages = a.page_table + static_cast<int64_t>(a.token_seq[t]) * a.max_pages;
  const int64_t row_stride = static_cast<int64_t>(a.num_kv_heads) * hd;
  const CacheT* k_base = static_cast<const CacheT*>(a.k_cache) + static_cast<int64_t>(kvh) * hd;
  const CacheT* v_base = static_cast<const CacheT*>(a.v_cache) + static_cast<int64_t>(kvh) * hd;
  const bool vec4 = (hd & 3) == 0;
  constexpr bool kFp8 = sizeof(CacheT) == 1;
  const float score_scale = kFp8 ? a.scale * a.k_scale : a.scale, value_scale = kFp8 ? a.v_scale : 1.0f;

  float m = -INFINITY, l = 0.0f;
  float acc[kDimsPerLane];
#pragma unroll
  for (int i = 0; i < kDimsPerLane; ++i) acc[i] = 0.0f;

  for (int tile = begin + warp * 32; tile < end; tile += kWarps * 32) {
    const int j = tile + lane;
    int64_t row = 0;
    float s = -INFINITY;
    if (j < end) {
      const int32_t page = pages[j / a.page_size];
      if (page < 0) {
        set_error(a.error_flags, kErrAbsentPage);
      } else {
        row = static_cast<int64_t>(page) * a.page_size + j % a.page_size;
        const CacheT* kr = k_base + row * row_stride;
        float dot = 0.0f;
        if (vec4) {
          for (int d = 0; d < hd; d += 4) {
            const float4 kv = cache_load4(kr + d);
            const float4 qv = *reinterpret_cast<const float4*>(q_s + d);
            dot += kv.x * qv.x + kv.y * qv.y + kv.z * qv.z + kv.w * qv.w;
          }
        } else {
          for (int d = 0; d < hd; ++d) dot += cache_load(kr + d) * q_s[d];
        }
        s = dot * score_scale;
      }
    }
    const float m_new = fmaxf(m, warp_max(s));
    if (m_new == -INFINITY) continue;  // warp-uniform: nothing valid yet
    const float correction = expf(m - m_new);
    const float p = s == -INFINITY ? 0.0f : expf(s - m_new);
    l = l * correction + warp_sum(p);
#pragma unroll
    for (int i = 0; i < kDimsPerLane; ++i) acc[i] *= correction;
    m = m_new;
    const int count = min(32, end - tile);
    for (int jj = 0; jj < count; ++jj) {
      const float pj = product_operand(__shfl_sync(0xffffffffu, p, jj), a_cache_tag<CacheT>());
      const long long rj = __shfl_sync(0xffffffffu, static_cast<long long>(row), jj);
      if (pj == 0.0f) continue;  // warp-uniform (broadcast value)
      const CacheT* vr = v_base + rj * row_stride;
#pragma unroll
      for (int i = 0; i < kDimsPerLane; ++i) {
        const int d = lane + 32 * i;
        if (d < hd) acc[i] += pj * cache_load(vr + d);
      }
    }
  }

  // Merge the warps: per warp [m, l, acc[hd]].
  float* merged = smem + q_floats;
  const int stride = hd + 2;
  float* mine = merged + warp * stride;
  if (lane == 0) {
    mine[0] = m;
    mine[1] = l;
  }
#pragma unroll
  for (int i = 0; i < kDimsPerLane; ++i) {
    const int d = lane + 32 * i;
    if (d < hd) mine[2 + d] = acc[i];
  }
  __syncthreads();
  float max_all = -INFINITY;
  for (int w = 0; w < kWarps; ++w) max_all = fmaxf(max_all, merged[w * stride]);
  const bool final_pass = a.splits == 1;
  float sink = -INFINITY;
  if (final_pass && a.sinks) {
    sink = load_elem(a.sinks, a.sinks_type, h);
    max_all = fmaxf(max_all, sink);
  }
  float factor[kWarps];
  float denom = 0.0f;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) {
    const float mw = merged[w * stride];
    factor[w] = mw == -INFINITY ? 0.0f : expf(mw - max_all);
    denom += merged[w * stride + 1] * factor[w];
  }
  if (final_pass) {
    if (a.sinks) denom += expf(sink - max_all);
    const float inv = 1.0f / denom;
    float* out = a.out + (static_cast<int64_t>(t) * a.num_heads + h) * hd;
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
      float num = 0.0f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) num += merged[w * stride + 2 + d] * factor[w];
      out[d] = num * inv * value_scale;
    }
  } else {
    float* part = a.partial + ((static_cast<int64_t>(t) * a.num_heads + h) * a.splits + split) * stride;
    if (threadIdx.x == 0) {
      part[0] = max_all;
      part[1] = denom;
    }
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
      float num = 0.0f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) num += merged[w * stride + 2 + d] * factor[w];
      part[2 + d] = num * value_scale;
    }
  }
}

// Merges the key splits of one (token, head) and adds the sink term.
__global__ void attention_combine_kernel(AttentionArgs a) {
  pdl_enter();
  const int t = blockIdx.x, h = blockIdx.y, hd = a.head_dim, stride = hd + 2;
  const float* part = a.partial + (static_cast<int64_t>(t) * a.num_heads + h) * a.splits * stride;
  float sink = -INFINITY, max_all = -INFINITY;
  if (a.sinks) max_all = sink = load_elem(a.sinks, a.sinks_type, h);
  for (int s = 0; s < a.splits; ++s) max_all = fmaxf(max_all, part[s * stride]);
  float denom = a.sinks ? expf(sink - max_all) : 0.0f;
  for (int s = 0; s < a.splits; ++s) {
    const float ms = part[s * stride];
    if (ms != -INFINITY) denom += part[s * stride + 1] * expf(ms - max_all);
  }
  const float inv = 1.0f / denom;
  float* out = a.out + (static_cast<int64_t>(t) * a.num_heads + h) * hd;
  for (int d = threadIdx.x; d < hd; d += blockDim.x) {
    float num = 0.0f;
    for (int s = 0; s < a.splits; ++s) {
      const float ms = part[s * stride];
      if (ms != -INFINITY) num += part[s * stride + 2 + d] * expf(ms - max_all);
    }
    out[d] = num * inv;
  }
}

template <int kDimsPerLane>
void launch_attention_for(const AttentionArgs& a, cudaStream_t stream) {
  const dim3 grid(a.num_tokens, a.num_heads, a.splits);
  const size_t smem = (((a.head_dim + 3) & ~3) + kWarps * (a.head_dim + 2)) * sizeof(float);
  switch (a.cache_type) {
    case KvType::kBF16:
      return launch_kernel(attention_kernel<kDimsPerLane, uint16_t>, grid, kWarps * 32, smem, stream, a);
    case KvType::kFp8:
      return launch_kernel(attention_kernel<kDimsPerLane, uint8_t>, grid, kWarps * 32, smem, stream, a);
    case KvType::kF32: return launch_kernel(attention_kernel<kDimsPerLane, float>, grid, kWarps * 32, smem, stream, a);
  }
}

}  // namespace

void launch_store_kv(const float* k, const float* v, int64_t num_tokens, int64_t row_width, const int32_t* slots,
                     int64_t cache_rows, void* k_cache, void* v_cache, KvType cache_type, float k_scale, float v_scale,
                     uint32_t* error_flags, cudaStream_t stream) {
  if (num_tokens == 0) return;
  switch (cache_type) {
    case KvType::kBF16:
      return launch_kernel(store_kv_kernel<uint16_t>, num_tokens, 256, 0, stream, k, v, row_width, slots, cache_rows,
                           static_cast<uint16_t*>(k_cache), static_cast<uint16_t*>(v_cache), k_scale, v_scale,
                           error_flags);
    case KvType::kFp8:
      return launch_kernel(store_kv_kernel<uint8_t>, num_tokens, 256, 0, stream, k, v, row_width, slots, cache_rows,
                           static_cast<uint8_t*>(k_cache), static_cast<uint8_t*>(v_cache), k_scale, v_scale,
                           error_flags);
    case KvType::kF32:
      return launch_kernel(store_kv_kernel<float>, num_tokens, 256, 0, stream, k, v, row_width, slots, cache_rows,
                           static_cast<float*>(k_cache), static_cast<float*>(v_cache), k_scale, v_scale, error_flags);
  }
}

int64_t attention_partial_floats(int32_t num_tokens, int32_t num_heads, int32_t head_dim, int32_t max_kv_len,
                                 int32_t window, int32_t num_sms, int32_t* splits) {
  const int64_t range = window > 0 ? std::min(window, max_kv_len) : max_kv_len;
  const int64_t blocks = static_cast<int64_t>(num_tokens) * num_heads;
  const int64_t target = 2 * static_cast<int64_t>(num_sms);
  int64_t count = 1;
  if (blocks < target && range > 512) count = std::min({ceil_div(range, 256), ceil_div(target, blocks), int64_t{64}});
  *splits = static_cast<int32_t>(std::max<int64_t>(count, 1));
  return *splits > 1 ? blocks * *splits * (head_dim + 2) : 0;
}

void launch_attention(const AttentionArgs& args, cudaStream_t stream) {
  if (args.num_tokens == 0) return;
  if (args.head_dim <= 32) {
    launch_attention_for<1>(args, stream);
  } else if (args.head_dim <= 64) {
    launch_attention_for<2>(args, stream);
  } else if (args.head_dim <= 128) {
    launch_attention_for<4>(args, stream);
  } else {
    launch_attention_for<8>(args, stream);
  }
  if (args.splits > 1) launch_attention_combine(args, stream);
}

void launch_attention_combine(const AttentionArgs& args, cudaStream_t stream) {
  launch_kernel(attention_combine_kernel, dim3(args.num_tokens, args.num_heads), 128, 0, stream, args);
}

}  // namespace rs::cuda
