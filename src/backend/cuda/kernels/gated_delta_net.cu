// Gated delta net on CUDA (MODELS.md §1.6), a first version for correctness: the causal depthwise conv1d with its
// rolling state (one thread per channel and sequence, walking the sequence's tokens), the gated delta rule in its
// recurrent form for every token (one block per sequence and value head; each thread keeps one column of the
// dk x dv state in registers), the gated RMSNorm and the sigmoid gate. Both state kernels honour
// StateBatchView::checkpoint_slots (speculative verification). Prefill runs token by token here; the chunked form
// (tensor cores over chunks of 64) is the next step for long prompts.
#include <algorithm>

#include "backend/cuda/cuda_check.cuh"
#include "backend/cuda/kernels/device_utils.cuh"
#include "backend/cuda/kernels/kernels.cuh"
#include "backend/cuda/kernels/launch.cuh"

namespace rs::cuda {
namespace {

constexpr int kMaxConvKernel = 8;
constexpr int kConvThreads = 128;
constexpr float kL2Eps = 1e-6f;

__global__ void causal_conv1d_kernel(const float* x, const float* weight, float* conv_state, GdnBatch batch,
                                     int64_t channels, int kernel, float* out) {
  pdl_enter();
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int s = blockIdx.y;
  const int32_t slot = batch.state_slots[s];
  const int32_t begin = batch.seq_token_start[s], end = batch.seq_token_start[s + 1];
  if (c >= channels || slot < 0 || begin == end) return;
  const int history = kernel - 1;
  const bool fresh = batch.positions[begin] == 0;
  float* state = conv_state + (static_cast<int64_t>(slot) * channels + c) * history;
  float w[kMaxConvKernel], window[kMaxConvKernel];  // window[0, history): the last inputs, oldest first
  for (int j = 0; j < kernel; ++j) w[j] = weight[c * kernel + j];
  for (int j = 0; j < history; ++j) window[j] = fresh ? 0.0f : state[j];
  for (int32_t t = begin; t < end; ++t) {
    window[history] = x[static_cast<int64_t>(t) * channels + c];
    float sum = 0.0f;
    for (int j = 0; j < kernel; ++j) sum += w[j] * window[j];
    out[static_cast<int64_t>(t) * channels + c] = sum / (1.0f + expf(-sum));
    for (int j = 0; j < history; ++j) window[j] = window[j + 1];
    if (batch.checkpoint_slots && batch.checkpoint_slots[t] >= 0) {
      float* kept = conv_state + (static_cast<int64_t>(batch.checkpoint_slots[t]) * channels + c) * history;
      for (int j = 0; j < history; ++j) kept[j] = window[j];
    }
  }
  for (int j = 0; j < history; ++j) state[j] = window[j];
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the result.
__device__ float block_total(float v, float* scratch) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  v = warp_sum(v);
  __syncthreads();  // scratch may still be read from the previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float total = 0.0f;
  for (int w = 0; w < warps; ++w) total += scratch[w];
  return total;
}

// Block (value head h, sequence s); thread j owns column j of the head's state S [dk][dv] in registers.
// Per token (torch_recurrent_gated_delta_rule): S = exp(g) S; u = S^T k; S += k ((v - u) beta)^T; o = S^T q.
template <int DK>
__global__ void __launch_bounds__(256)
    gated_delta_rule_kernel(const float* qkv, const float* ba, const float* a_log, const float* dt_bias,
                            float* state_base, GdnBatch batch, GdnShape p, float* out) {
  pdl_enter();
  __shared__ float q_s[DK], k_s[DK], scratch[32];
  const int h = blockIdx.x, s = blockIdx.y, j = threadIdx.x;
  const int32_t slot = batch.state_slots[s];
  const int32_t begin = batch.seq_token_start[s], end = batch.seq_token_start[s + 1];
  if (slot < 0 || begin == end) return;  // block-uniform
  const int nv = p.num_v_heads, dv = p.v_head_dim;
  const int64_t key_dim = static_cast<int64_t>(p.num_k_heads) * DK, width = 2 * key_dim + int64_t{nv} * dv;
  const int k_head = h / (nv / p.num_k_heads);
  const float q_scale = rsqrtf(static_cast<float>(DK)), decay_rate = -expf(a_log[h]);
  const bool fresh = batch.positions[begin] == 0;
  const bool column = j < dv;
  float* state = state_base + (static_cast<int64_t>(slot) * nv + h) * DK * dv;
  float col[DK];
#pragma unroll
  for (int i = 0; i < DK; ++i) col[i] = column && !fresh ? state[i * dv + j] : 0.0f;
  for (int32_t t = begin; t < end; ++t) {
    const float* row = qkv + static_cast<int64_t>(t) * width;
    float qq = 0.0f, kk = 0.0f;
    for (int i = j; i < DK; i += blockDim.x) {
      const float q = row[k_head * DK + i], k = row[key_dim + k_head * DK + i];
      q_s[i] = q, k_s[i] = k;
      qq += q * q, kk += k * k;
    }
    qq = block_total(qq, scratch);
    kk = block_total(kk, scratch);
    const float q_mul = q_scale / sqrtf(qq + kL2Eps), k_inv = 1.0f / sqrtf(kk + kL2Eps);
    const float* b_a = ba + static_cast<int64_t>(t) * 2 * nv;
    const float beta = 1.0f / (1.0f + expf(-b_a[h]));
    const float a = b_a[nv + h] + dt_bias[h];
    const float g = decay_rate * (a > 20.0f ? a : log1pf(expf(a)));  // torch's softplus threshold
    const float decay = expf(g);
    if (column) {
      const float v = row[2 * key_dim + static_cast<int64_t>(h) * dv + j];
      float u = 0.0f;
#pragma unroll
      for (int i = 0; i < DK; ++i) {
        col[i] *= decay;
        u += col[i] * (k_s[i] * k_inv);
      }
      const float delta = (v - u) * beta;
      float o = 0.0f;
#pragma unroll
      for (int i = 0; i < DK; ++i) {
        col[i] += (k_s[i] * k_inv) * delta;
        o += col[i] * (q_s[i] * q_mul);
      }
      out[(static_cast<int64_t>(t) * nv + h) * dv + j] = o;
      if (batch.checkpoint_slots && batch.checkpoint_slots[t] >= 0) {
        float* kept = state_base + (static_cast<int64_t>(batch.checkpoint_slots[t]) * nv + h) * DK * dv;
#pragma unroll
        for (int i = 0; i < DK; ++i) kept[i * dv + j] = col[i];
      }
    }
    __syncthreads();  // q_s / k_s are rewritten by the next token
  }
  if (column) {
#pragma unroll
    for (int i = 0; i < DK; ++i) state[i * dv + j] = col[i];
  }
}

// One warp per row: out = x * rsqrt(mean(x^2) + eps) * weight * silu(z).
__global__ void gated_rms_norm_kernel(const float* x, const float* z, const void* weight, ElemType type, int64_t rows,
                                      int64_t width, float eps, float* out) {
  pdl_enter();
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (row >= rows) return;
  const int lane = threadIdx.x % 32;
  const float* in = x + row * width;
  float sum = 0.0f;
  for (int64_t i = lane; i < width; i += 32) sum += in[i] * in[i];
  const float scale = 1.0f / sqrtf(warp_sum(sum) / static_cast<float>(width) + eps);
  for (int64_t i = lane; i < width; i += 32) {
    const float gate = z[row * width + i];
    out[row * width + i] = in[i] * scale * load_elem(weight, type, i) * (gate / (1.0f + expf(-gate)));
  }
}

__global__ void sigmoid_mul_kernel(const float* x, const float* gate, int64_t rows, int64_t width, int64_t gate_width,
                                   float* out) {
  pdl_enter();
  const int64_t count = rows * width;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / width;
    const float g = gate[gate_width == 1 ? r : i];
    out[i] = x[i] / (1.0f + expf(-g));
  }
}

}  // namespace

void launch_causal_conv1d(const float* x, const float* weight, float* conv_state, const GdnBatch& batch,
                          int64_t channels, int32_t kernel, float* out, cudaStream_t stream) {
  RS_CHECK(kernel >= 2 && kernel <= kMaxConvKernel, "causal_conv1d: kernel {} (2..{})", kernel, kMaxConvKernel);
  if (batch.num_seqs == 0) return;
  const dim3 grid(static_cast<unsigned>(ceil_div(channels, int64_t{kConvThreads})),
                  static_cast<unsigned>(batch.num_seqs));
  launch_kernel(causal_conv1d_kernel, grid, kConvThreads, 0, stream, x, weight, conv_state, batch, channels, kernel,
                out);
}

bool gated_delta_rule_supported(const GdnShape& p) {
  return (p.k_head_dim == 64 || p.k_head_dim == 128) && p.v_head_dim >= 1 && p.v_head_dim <= 256 && p.num_k_heads > 0 &&
         p.num_v_heads % p.num_k_heads == 0;
}

void launch_gated_delta_rule(const float* qkv, const float* ba, const float* a_log, const float* dt_bias, float* state,
                             const GdnBatch& batch, const GdnShape& p, float* out, cudaStream_t stream) {
  RS_CHECK(gated_delta_rule_supported(p), "gated_delta_rule: key head dim {} / value head dim {} unsupported",
           p.k_head_dim, p.v_head_dim);
  if (batch.num_seqs == 0) return;
  const dim3 grid(static_cast<unsigned>(p.num_v_heads), static_cast<unsigned>(batch.num_seqs));
  const int threads = static_cast<int>(ceil_div(int64_t{std::max(p.v_head_dim, 32)}, int64_t{32}) * 32);
  if (p.k_head_dim == 64) {
    launch_kernel(gated_delta_rule_kernel<64>, grid, threads, 0, stream, qkv, ba, a_log, dt_bias, state, batch, p, out);
  } else {
    launch_kernel(gated_delta_rule_kernel<128>, grid, threads, 0, stream, qkv, ba, a_log, dt_bias, state, batch, p,
                  out);
  }
}

void launch_gated_rms_norm(const float* x, const float* z, const void* weight, ElemType type, int64_t rows,
                           int64_t width, float eps, float* out, cudaStream_t stream) {
  if (rows == 0) return;
  constexpr int kWarps = 8;
  launch_kernel(gated_rms_norm_kernel, static_cast<unsigned>(ceil_div(rows, int64_t{kWarps})), kWarps * 32, 0, stream,
                x, z, weight, type, rows, width, eps, out);
}

void launch_sigmoid_mul(const float* x, const float* gate, int64_t rows, int64_t width, int64_t gate_width, float* out,
                        cudaStream_t stream) {
  const int64_t count = rows * width;
  if (count == 0) return;
  const unsigned blocks = static_cast<unsigned>(std::clamp<int64_t>(ceil_div(count, int64_t{256}), 1, 65535 * 8));
  launch_kernel(sigmoid_mul_kernel, blocks, 256, 0, stream, x, gate, rows, width, gate_width, out);
}

}  // namespace rs::cuda
