// Row-wise and elementwise CUDA kernels: embedding, RMSNorm, add, SiLU-gated product, gpt-oss GLU, row gather, bias,
// and the bf16 hi/lo split that feeds cuBLAS. All memory-bound; one thread block per row or a grid-stride loop.
#include <algorithm>
#include <type_traits>

#include "backend/cuda/cuda_check.cuh"
#include "backend/cuda/kernels/device_utils.cuh"
#include "backend/cuda/kernels/launch.cuh"

namespace rs::cuda {
namespace {

constexpr int kThreads = 256;

int grid_for(int64_t count, int per_thread = 1) {
  return static_cast<int>(std::clamp<int64_t>(ceil_div(count, int64_t{kThreads} * per_thread), 1, 65535 * 8));
}

__global__ void embedding_kernel(const void* table, ElemType type, int64_t vocab, int64_t hidden, const int32_t* ids,
                                 float* out, uint32_t* error_flags) {
  pdl_enter();
  const int64_t t = blockIdx.x;
  const int32_t id = ids[t];
  const bool valid = id >= 0 && id < vocab;
  if (!valid && threadIdx.x == 0) set_error(error_flags, kErrTokenId);
  for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x)
    out[t * hidden + i] = valid ? load_elem(table, type, id * hidden + i) : 0.0f;
}

// One warp per row (narrow rows such as per-head q/k norms) or one block per row.
template <bool kWarpPerRow, typename OutT>
__global__ void rms_norm_kernel(const float* x, const void* weight, ElemType type, int64_t rows, int64_t width,
                                float eps, bool add_one, OutT* out) {
  pdl_enter();
  const int64_t row = kWarpPerRow ? blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32 : blockIdx.x;
  if (row >= rows) return;  // whole warps leave together; block_sum is not used in this mode
  const int step = kWarpPerRow ? 32 : blockDim.x;
  const int first = kWarpPerRow ? threadIdx.x % 32 : threadIdx.x;
  const float* in = x + row * width;
  float sum = 0.0f;
  for (int64_t i = first; i < width; i += step) sum += in[i] * in[i];
  if constexpr (kWarpPerRow) {
    sum = warp_sum(sum);
  } else {
    sum = block_sum(sum);
  }
  const float scale = 1.0f / sqrtf(sum / static_cast<float>(width) + eps);
  for (int64_t i = first; i < width; i += step) {
    float w = load_elem(weight, type, i);
    if (add_one) w += 1.0f;
    store_act(out + row * width + i, in[i] * scale * w);
  }
}

__global__ void add_kernel(const float* a, const float* b, float* out, int64_t count) {
  pdl_enter();
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count; i += int64_t{gridDim.x} * blockDim.x)
    out[i] = a[i] + b[i];
}

__global__ void add4_kernel(const float4* a, const float4* b, float4* out, int64_t count4) {
  pdl_enter();
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count4; i += int64_t{gridDim.x} * blockDim.x) {
    const float4 x = a[i], y = b[i];
    out[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
  }
}

template <typename OutT>
__global__ void silu_mul_kernel(const float* gate_up, int64_t rows, int64_t inter, OutT* out) {
  pdl_enter();
  const int64_t count = rows * inter;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / inter, c = i % inter;
    const float g = gate_up[r * 2 * inter + c], u = gate_up[r * 2 * inter + inter + c];
    store_act(out + i, silu_times(g, u));
  }
}

__global__ void clamped_swiglu_kernel(const float* gate_up, int64_t rows, int64_t inter, float alpha, float limit,
                                      float* out) {
  pdl_enter();
  const int64_t count = rows * inter;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / inter, c = i % inter;
    out[i] = clamped_swiglu(gate_up[r * 2 * inter + 2 * c], gate_up[r * 2 * inter + 2 * c + 1], alpha, limit);
  }
}

__global__ void gather_rows_kernel(const float* x, const int32_t* rows, int64_t width, float* out) {
  pdl_enter();
  const int64_t r = blockIdx.x;
  const int64_t src = rows[r];
  for (int64_t i = threadIdx.x; i < width; i += blockDim.x) out[r * width + i] = x[src * width + i];
}

__global__ void scatter_rows_kernel(const float* x, const int32_t* rows, int64_t width, int64_t out_width,
                                    int64_t out_rows, float* out, uint32_t* error_flags) {
  pdl_enter();
  const int64_t t = blockIdx.x;
  const int64_t dst = rows[t];
  if (dst < 0) return;
  if (dst >= out_rows) {
    if (threadIdx.x == 0) set_error(error_flags, kErrKvSlot);
    return;
  }
  for (int64_t i = threadIdx.x; i < width; i += blockDim.x) out[dst * out_width + i] = x[t * width + i];
}

__global__ void add_bias_kernel(float* out, int64_t rows, int64_t features, const void* bias, ElemType type) {
  pdl_enter();
  const int64_t count = rows * features;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count; i += int64_t{gridDim.x} * blockDim.x)
    out[i] += load_elem(bias, type, i % features);
}

__global__ void split_bf16_kernel(const float* x, int64_t count, __nv_bfloat16* hi, __nv_bfloat16* lo) {
  pdl_enter();
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count; i += int64_t{gridDim.x} * blockDim.x) {
    const float v = x[i];
    const __nv_bfloat16 h = __float2bfloat16_rn(v);
    hi[i] = h;
    if (lo) lo[i] = __float2bfloat16_rn(v - __bfloat162float(h));
  }
}

}  // namespace

void launch_embedding(const void* table, ElemType table_type, int64_t vocab, int64_t hidden, const int32_t* ids,
                      int64_t num_tokens, float* out, uint32_t* error_flags, cudaStream_t stream) {
  if (num_tokens == 0) return;
  launch_kernel(embedding_kernel, num_tokens, kThreads, 0, stream, table, table_type, vocab, hidden, ids, out,
                error_flags);
}

namespace {
template <typename OutT>
void launch_rms_norm_typed(const float* x, const void* weight, ElemType weight_type, int64_t rows, int64_t width,
                           float eps, bool add_one, OutT* out, cudaStream_t stream) {
  if (width <= 512) {
    const int rows_per_block = kThreads / 32;
    launch_kernel(rms_norm_kernel<true, OutT>, ceil_div(rows, rows_per_block), kThreads, 0, stream, x, weight,
                  weight_type, rows, width, eps, add_one, out);
  } else if (!launch_rms_norm_vec(x, weight, weight_type, rows, width, eps, add_one, out,
                                  std::is_same_v<OutT, __nv_bfloat16>, stream)) {
    launch_kernel(rms_norm_kernel<false, OutT>, rows, kThreads * 2, 0, stream, x, weight, weight_type, rows, width, eps,
                  add_one, out);
  }
}
}  // namespace

void launch_rms_norm(const float* x, const void* weight, ElemType weight_type, int64_t rows, int64_t width, float eps,
                     bool add_one, void* out, bool out_bf16, cudaStream_t stream) {
  if (rows == 0) return;
  if (out_bf16)
    return launch_rms_norm_typed(x, weight, weight_type, rows, width, eps, add_one, static_cast<__nv_bfloat16*>(out),
                                 stream);
  launch_rms_norm_typed(x, weight, weight_type, rows, width, eps, add_one, static_cast<float*>(out), stream);
}

void launch_add(const float* a, const float* b, float* out, int64_t count, cudaStream_t stream) {
  if (count == 0) return;
  const bool aligned =
      count % 4 == 0 &&
      (reinterpret_cast<uintptr_t>(a) | reinterpret_cast<uintptr_t>(b) | reinterpret_cast<uintptr_t>(out)) % 16 == 0;
  if (aligned) {
    launch_kernel(add4_kernel, grid_for(count / 4), kThreads, 0, stream, reinterpret_cast<const float4*>(a),
                  reinterpret_cast<const float4*>(b), reinterpret_cast<float4*>(out), count / 4);
  } else {
    launch_kernel(add_kernel, grid_for(count), kThreads, 0, stream, a, b, out, count);
  }
}

void launch_silu_mul(const float* gate_up, int64_t rows, int64_t inter, void* out, bool out_bf16, cudaStream_t stream) {
  if (rows * inter == 0) return;
  if (out_bf16)
    return launch_kernel(silu_mul_kernel<__nv_bfloat16>, grid_for(rows * inter), kThreads, 0, stream, gate_up, rows,
                         inter, static_cast<__nv_bfloat16*>(out));
  launch_kernel(silu_mul_kernel<float>, grid_for(rows * inter), kThreads, 0, stream, gate_up, rows, inter,
                static_cast<float*>(out));
}

void launch_clamped_swiglu(const float* gate_up, int64_t rows, int64_t inter, float alpha, float limit, float* out,
                           cudaStream_t stream) {
  if (rows * inter == 0) return;
  launch_kernel(clamped_swiglu_kernel, grid_for(rows * inter), kThreads, 0, stream, gate_up, rows, inter, alpha, limit,
                out);
}

void launch_gather_rows(const float* x, const int32_t* rows, int64_t num_rows, int64_t width, float* out,
                        cudaStream_t stream) {
  if (num_rows == 0) return;
  launch_kernel(gather_rows_kernel, num_rows, kThreads, 0, stream, x, rows, width, out);
}

void launch_scatter_rows(const float* x, const int32_t* rows, int64_t num_rows, int64_t width, float* out,
                         int64_t out_width, int64_t out_rows, uint32_t* error_flags, cudaStream_t stream) {
  if (num_rows == 0) return;
  launch_kernel(scatter_rows_kernel, num_rows, kThreads, 0, stream, x, rows, width, out_width, out_rows, out,
                error_flags);
}

void launch_add_bias(float* out, int64_t rows, int64_t features, const void* bias, ElemType bias_type,
                     cudaStream_t stream) {
  if (rows * features == 0) return;
  launch_kernel(add_bias_kernel, grid_for(rows * features), kThreads, 0, stream, out, rows, features, bias, bias_type);
}

void launch_split_bf16(const float* x, int64_t count, void* hi, void* lo, cudaStream_t stream) {
  if (count == 0) return;
  launch_kernel(split_bf16_kernel, grid_for(count), kThreads, 0, stream, x, count, static_cast<__nv_bfloat16*>(hi),
                static_cast<__nv_bfloat16*>(lo));
}

}  // namespace rs::cuda
