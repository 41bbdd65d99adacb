// Fused attention-input kernels: the residual add with the next RMSNorm, and the split of one fused q|k|v projection
// into a normed, rotated q and normed, rotated k plus v stored straight into the paged cache. Each replaces several
// launches (and round trips of the activations through memory) per layer of a decode step.
#include <algorithm>

#include "backend/cuda/cuda_check.cuh"
#include "backend/cuda/kernels/device_utils.cuh"
#include "backend/cuda/kernels/launch.cuh"
#include "backend/cuda/kernels/qkv_head.cuh"

namespace rs::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxHeadDim = 512;
constexpr int kHeadsPerBlock = 4;  // qkv_prepare: one warp per head

// One block per row: x += delta (stored), out = x * rsqrt(mean(x^2) + eps) * w.
template <typename OutT>
__global__ void add_rms_norm_kernel(float* x, const float* delta, const void* weight, ElemType type, int64_t width,
                                    float eps, bool add_one, OutT* out) {
  pdl_enter();
  const int64_t row = blockIdx.x;
  float* xr = x + row * width;
  const float* dr = delta + row * width;
  float sum = 0.0f;
  for (int64_t i = threadIdx.x; i < width; i += blockDim.x) {
    const float v = xr[i] + dr[i];
    xr[i] = v;
    sum += v * v;
  }
  sum = block_sum(sum);
  const float scale = 1.0f / sqrtf(sum / static_cast<float>(width) + eps);
  for (int64_t i = threadIdx.x; i < width; i += blockDim.x) {  // each thread rereads what it wrote
    float w = load_elem(weight, type, i);
    if (add_one) w += 1.0f;
    store_act(out + row * width + i, xr[i] * scale * w);
  }
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

// The same for rows of at most kVecThreads * kVecPerThread float4s (hidden sizes up to 16k): every load of the row and
// of the weight is issued before any result is needed (weights even before the previous kernel ends), so the row
// costs one memory round trip and a block reduction instead of a chain of dependent loads. Without kAdd it is a plain
// rms_norm (x read only, delta unused).
constexpr int kVecThreads = 1024, kVecPerThread = 4;

template <bool kAdd, typename OutT>
__global__ void __launch_bounds__(kVecThreads)
    add_rms_norm_vec_kernel(float4* x, const float4* delta, const void* weight, ElemType type, int width4, float eps,
                            bool add_one, OutT* out) {
  float4 w[kVecPerThread], v[kVecPerThread];
#pragma unroll
  for (int k = 0; k < kVecPerThread; ++k) {
    const int i = threadIdx.x + k * blockDim.x;
    if (i < width4) w[k] = load_weight4(weight, type, i);
  }
  pdl_enter();
  const int64_t base = static_cast<int64_t>(blockIdx.x) * width4;
#pragma unroll
  for (int k = 0; k < kVecPerThread; ++k) {
    const int i = threadIdx.x + k * blockDim.x;
    if (i < width4) {
      const float4 a = x[base + i];
      if constexpr (kAdd) {
        const float4 b = delta[base + i];
        v[k] = make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
      } else {
        v[k] = a;
      }
    }
  }
  float sum = 0.0f;
#pragma unroll
  for (int k = 0; k < kVecPerThread; ++k) {
    const int i = threadIdx.x + k * blockDim.x;
    if (i < width4) {
      if constexpr (kAdd) x[base + i] = v[k];
      sum += v[k].x * v[k].x + v[k].y * v[k].y + v[k].z * v[k].z + v[k].w * v[k].w;
    }
  }
  sum = block_sum(sum);
  const float scale = 1.0f / sqrtf(sum / static_cast<float>(4 * width4) + eps), one = add_one ? 1.0f : 0.0f;
#pragma unroll
  for (int k = 0; k < kVecPerThread; ++k) {
    const int i = threadIdx.x + k * blockDim.x;
    if (i < width4) {
      const float4 a = v[k], g = w[k];
      store_act4(out, base + i,
                 make_float4(a.x * scale * (g.x + one), a.y * scale * (g.y + one), a.z * scale * (g.z + one),
                             a.w * scale * (g.w + one)));
    }
  }
}

// Blocks (token, group of kHeadsPerBlock heads), one warp per head (q heads, then k heads, then v heads): a decode
// step's few tokens still spread over many SMs. A q/k head is normed and rotated by prepare_head (qkv_head.cuh).
template <typename CacheT>
__global__ void qkv_prepare_kernel(QkvPrepareArgs a) {
  pdl_enter();
  __shared__ float staged[kHeadsPerBlock][kMaxHeadDim];
  const int64_t t = blockIdx.x;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int hd = a.head_dim, half = a.rotary_dim / 2;
  const int32_t pos = a.positions[t];
  const bool pos_ok = pos >= 0 && pos < a.max_positions;
  const bool reporter = blockIdx.y == 0 && threadIdx.x == 0;
  if (!pos_ok && reporter) set_error(a.error_flags, kErrPosition);
  const int64_t slot = a.slots[t];
  if (slot >= a.cache_rows && reporter) set_error(a.error_flags, kErrKvSlot);
  const bool store = slot >= 0 && slot < a.cache_rows;
  const int total_heads = a.num_heads + 2 * a.num_kv_heads;
  const float* row = a.qkv + t * static_cast<int64_t>(total_heads) * hd;
  const float* c = a.cos_sin + static_cast<int64_t>(pos_ok ? pos : 0) * a.rotary_dim;
  const float* s = c + half;
  float* buf = staged[warp];
  const int head = blockIdx.y * kHeadsPerBlock + warp;
  if (head < total_heads) {
    const float* in = row + static_cast<int64_t>(head) * hd;
    const bool is_q = head < a.num_heads, is_v = head >= a.num_heads + a.num_kv_heads;
    const int kv_head = is_q ? 0 : head - a.num_heads - (is_v ? a.num_kv_heads : 0);
    if (is_v) {
      if (store) {
        CacheT* dst = static_cast<CacheT*>(a.v_cache) + (slot * a.num_kv_heads + kv_head) * hd;
        for (int i = lane; i < hd; i += 32) store_cache(dst + i, in[i], a.v_scale);
      }
      return;
    }
    const void* norm = is_q ? a.q_norm : a.k_norm;
    CacheT* k_dst = store ? static_cast<CacheT*>(a.k_cache) + (slot * a.num_kv_heads + kv_head) * hd : nullptr;
    float* q_dst = a.q_out + (t * a.num_heads + head) * hd;
    prepare_head(in, hd, norm, a.norm_type, a.eps, c, s, a.rotary_dim, pos_ok, buf, [&](int i, float v) {
      if (is_q) {
        q_dst[i] = v;
      } else if (store) {
        store_cache(k_dst + i, v, a.k_scale);
      }
    });
  }
}

}  // namespace

namespace {
bool vec_norm_applies(const void* x, const void* delta, const void* weight, ElemType weight_type, int64_t width,
                      const void* out) {
  const auto aligned = [](const void* p, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; };
  return width % 4 == 0 && width <= int64_t{4} * kVecThreads * kVecPerThread && aligned(x, 16) && aligned(delta, 16) &&
         aligned(out, 16) && aligned(weight, weight_type == ElemType::kF32 ? 16 : 8);
}

template <bool kAdd>
void launch_vec_norm(float* x, const float* delta, const void* weight, ElemType weight_type, int64_t rows,
                     int64_t width, float eps, bool add_one, void* out, bool out_bf16, cudaStream_t stream) {
  // Threads a row needs, in whole warps (block_sum wants a multiple of 32).
  const int width4 = static_cast<int>(width / 4);
  const int threads = static_cast<int>(std::min<int64_t>(kVecThreads, ceil_div(width4, kVecPerThread * 32) * 32));
  auto* x4 = reinterpret_cast<float4*>(x);
  auto* delta4 = reinterpret_cast<const float4*>(delta);
  if (out_bf16)
    return launch_kernel(add_rms_norm_vec_kernel<kAdd, __nv_bfloat16>, rows, threads, 0, stream, x4, delta4, weight,
                         weight_type, width4, eps, add_one, static_cast<__nv_bfloat16*>(out));
  launch_kernel(add_rms_norm_vec_kernel<kAdd, float>, rows, threads, 0, stream, x4, delta4, weight, weight_type, width4,
                eps, add_one, static_cast<float*>(out));
}
}  // namespace

bool launch_rms_norm_vec(const float* x, const void* weight, ElemType weight_type, int64_t rows, int64_t width,
                         float eps, bool add_one, void* out, bool out_bf16, cudaStream_t stream) {
  if (!vec_norm_applies(x, x, weight, weight_type, width, out)) return false;
  // kAdd = false never writes x.
  if (rows > 0)
    launch_vec_norm<false>(const_cast<float*>(x), nullptr, weight, weight_type, rows, width, eps, add_one, out,
                           out_bf16, stream);
  return true;
}

void launch_add_rms_norm(float* x, const float* delta, const void* weight, ElemType weight_type, int64_t rows,
                         int64_t width, float eps, bool add_one, void* out, bool out_bf16, cudaStream_t stream) {
  if (rows == 0) return;
  if (vec_norm_applies(x, delta, weight, weight_type, width, out))
    return launch_vec_norm<true>(x, delta, weight, weight_type, rows, width, eps, add_one, out, out_bf16, stream);
  if (out_bf16)
    return launch_kernel(add_rms_norm_kernel<__nv_bfloat16>, rows, kThreads * 2, 0, stream, x, delta, weight,
                         weight_type, width, eps, add_one, static_cast<__nv_bfloat16*>(out));
  launch_kernel(add_rms_norm_kernel<float>, rows, kThreads * 2, 0, stream, x, delta, weight, weight_type, width, eps,
                add_one, static_cast<float*>(out));
}

void launch_qkv_prepare(const QkvPrepareArgs& args, cudaStream_t stream) {
  if (args.num_tokens == 0) return;
  RS_CHECK(args.head_dim <= kMaxHeadDim, "qkv_prepare: head_dim {} above {}", args.head_dim, kMaxHeadDim);
  const dim3 grid(static_cast<unsigned>(args.num_tokens),
                  static_cast<unsigned>(ceil_div(args.num_heads + 2 * args.num_kv_heads, kHeadsPerBlock)));
  switch (args.cache_type) {
    case KvType::kBF16: return launch_kernel(qkv_prepare_kernel<uint16_t>, grid, kHeadsPerBlock * 32, 0, stream, args);
    case KvType::kFp8: return launch_kernel(qkv_prepare_kernel<uint8_t>, grid, kHeadsPerBlock * 32, 0, stream, args);
    case KvType::kF32: return launch_kernel(qkv_prepare_kernel<float>, grid, kHeadsPerBlock * 32, 0, stream, args);
  }
}

}  // namespace rs::cuda
