// Gated delta net on CUDA (MODELS.md §1.6): the causal depthwise conv1d with its rolling state, the gated delta rule
// in its recurrent form for every token, the gated RMSNorm and the sigmoid gate. Both state kernels honour
// StateBatchView::checkpoint_slots (speculative verification).
//
// The conv runs one thread per channel and chunk of 64 tokens (outputs depend on the last K inputs only, so chunks are
// independent). The delta rule is a chain over a sequence's tokens: one warp per (sequence, value head, 16 or 32 state
// columns), the head's state in registers (one or two lanes per column), the next token's inputs loaded while the
// current one computes; no block barriers. Prefill steps go to the chunked form (gated_delta_chunked.cu).
#include <algorithm>

#include "backend/cuda/cuda_check.cuh"
#include "backend/cuda/kernels/device_utils.cuh"
#include "backend/cuda/kernels/kernels.cuh"
#include "backend/cuda/kernels/launch.cuh"

namespace rs::cuda {
namespace {

constexpr int kMaxConvKernel = 8;
constexpr int kConvThreads = 128;
constexpr int kConvChunk = 64;  // tokens per conv thread
constexpr float kL2Eps = 1e-6f;

// Grid (channel blocks, sequences, token chunks: an upper bound, surplus blocks exit). Only a sequence's first chunk
// reads and writes its conv state, so chunks never race on it.
__global__ void causal_conv1d_kernel(const float* x, const float* weight, float* conv_state, GdnBatch batch,
                                     int64_t channels, int kernel, float* out) {
  pdl_enter();
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int s = blockIdx.y;
  const int32_t slot = batch.state_slots[s];
  const int32_t begin = batch.seq_token_start[s], end = batch.seq_token_start[s + 1];
  const int32_t first = begin + static_cast<int32_t>(blockIdx.z) * kConvChunk;
  if (c >= channels || slot < 0 || first >= end) return;
  const int32_t last = min(end, first + kConvChunk);
  const int history = kernel - 1;
  const bool fresh = batch.positions[begin] == 0;
  float* state = conv_state + (static_cast<int64_t>(slot) * channels + c) * history;
  float w[kMaxConvKernel], window[kMaxConvKernel];  // window[0, history): the inputs before token t, oldest first
  for (int j = 0; j < kernel; ++j) w[j] = weight[c * kernel + j];
  for (int j = 0; j < history; ++j) {
    const int32_t t = first - history + j;  // a chunk of 64 >= K reaches back into the state only when it is first
    window[j] = t >= begin ? x[static_cast<int64_t>(t) * channels + c] : fresh ? 0.0f : state[t - begin + history];
  }
  for (int32_t t = first; t < last; ++t) {
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
  if (first != begin) return;
  // The first chunk leaves the state: its own window when it was also the last, else the sequence's last inputs
  // (a sequence longer than one chunk has at least K - 1 of them).
  for (int j = 0; j < history; ++j)
    state[j] = last == end ? window[j] : x[static_cast<int64_t>(end - history + j) * channels + c];
}

// Warp (column block, value head h, sequence s) over kColumns columns of the head's state S [dk][dv]; a column's dk
// rows are split over kSplit adjacent lanes (registers: 64 rows per lane at most), which add their partial sums by
// shuffle. Per token (torch_recurrent_gated_delta_rule): S = exp(g) S; u = S^T k; S += k ((v - u) beta)^T; o = S^T q.
template <int DK>
struct DeltaRuleLayout {
  static constexpr int kSplit = DK > 64 ? 2 : 1;
  static constexpr int kRows = DK / kSplit;                            // state rows per lane
  static constexpr int kColumns = 32 / kSplit;                         // columns per warp
  static constexpr int kPerLane = (DK + 31) / 32;                      // q / k elements each lane loads
  static constexpr int kSums = kRows >= 64 ? 4 : kRows >= 32 ? 2 : 1;  // partial sums: shorter dependency chains
};

template <int DK>
__global__ void __launch_bounds__(32)
    gated_delta_rule_kernel(const float* qkv, const float* ba, const float* a_log, const float* dt_bias,
                            float* state_base, GdnBatch batch, GdnShape p, float* out) {
  pdl_enter();
  using L = DeltaRuleLayout<DK>;
  __shared__ float q_s[DK], k_s[DK];  // this token's normalised q (scaled) and k
  const int nv = p.num_v_heads, dv = p.v_head_dim, col_blocks = (dv + L::kColumns - 1) / L::kColumns;
  const int lane = threadIdx.x, h = blockIdx.x / col_blocks;
  const int j = (blockIdx.x % col_blocks) * L::kColumns + lane / L::kSplit;  // this lane's column
  const int row0 = (lane % L::kSplit) * L::kRows;                            // and its first row
  const int s = blockIdx.y;
  const int32_t slot = batch.state_slots[s];
  const int32_t begin = batch.seq_token_start[s], end = batch.seq_token_start[s + 1];
  if (slot < 0 || begin == end) return;  // warp-uniform
  const int64_t key_dim = static_cast<int64_t>(p.num_k_heads) * DK, width = 2 * key_dim + int64_t{nv} * dv;
  const int k_head = h / (nv / p.num_k_heads);
  const float q_scale = rsqrtf(static_cast<float>(DK)), decay_rate = -expf(a_log[h]), bias = dt_bias[h];
  const bool fresh = batch.positions[begin] == 0;
  const bool column = j < dv;
  const int64_t head_offset = static_cast<int64_t>(h) * DK * dv + static_cast<int64_t>(row0) * dv + j;
  float* state = state_base + static_cast<int64_t>(slot) * nv * DK * dv + head_offset;
  float col[L::kRows];
#pragma unroll
  for (int i = 0; i < L::kRows; ++i) col[i] = column && !fresh ? state[i * dv] : 0.0f;

  // Token t's inputs, loaded one token ahead.
  float q_next[L::kPerLane], k_next[L::kPerLane], v_next = 0.0f, b_next = 0.0f, a_next = 0.0f;
  const auto fetch = [&](int32_t t) {
    const float* row = qkv + static_cast<int64_t>(t) * width;
#pragma unroll
    for (int e = 0; e < L::kPerLane; ++e) {
      const int i = lane + 32 * e;
      q_next[e] = i < DK ? row[k_head * DK + i] : 0.0f;
      k_next[e] = i < DK ? row[key_dim + k_head * DK + i] : 0.0f;
    }
    v_next = column ? row[2 * key_dim + static_cast<int64_t>(h) * dv + j] : 0.0f;
    b_next = ba[static_cast<int64_t>(t) * 2 * nv + h];
    a_next = ba[static_cast<int64_t>(t) * 2 * nv + nv + h];
  };
  fetch(begin);
  for (int32_t t = begin; t < end; ++t) {
    float q[L::kPerLane], k[L::kPerLane];
    float qq = 0.0f, kk = 0.0f;
#pragma unroll
    for (int e = 0; e < L::kPerLane; ++e) q[e] = q_next[e], k[e] = k_next[e], qq += q[e] * q[e], kk += k[e] * k[e];
    const float v = v_next, b = b_next, a = a_next + bias;
    if (t + 1 < end) fetch(t + 1);
    const float q_mul = q_scale / sqrtf(warp_sum(qq) + kL2Eps), k_inv = 1.0f / sqrtf(warp_sum(kk) + kL2Eps);
    __syncwarp();  // every lane is done reading the previous token's q_s / k_s
#pragma unroll
    for (int e = 0; e < L::kPerLane; ++e) {
      const int i = lane + 32 * e;
      if (i < DK) q_s[i] = q[e] * q_mul, k_s[i] = k[e] * k_inv;
    }
    __syncwarp();
    const float beta = 1.0f / (1.0f + expf(-b));
    const float decay = expf(decay_rate * (a > 20.0f ? a : log1pf(expf(a))));  // torch's softplus threshold
    // Every lane computes (lanes past dv on zero columns): the shuffles below need the whole warp.
    float u[L::kSums] = {};
#pragma unroll
    for (int i = 0; i < L::kRows; ++i) {
      col[i] *= decay;
      u[i % L::kSums] += col[i] * k_s[row0 + i];
    }
    float u_all = 0.0f;
#pragma unroll
    for (int e = 0; e < L::kSums; ++e) u_all += u[e];
    if constexpr (L::kSplit == 2) u_all += __shfl_xor_sync(0xffffffffu, u_all, 1);
    const float delta = (v - u_all) * beta;
    float o[L::kSums] = {};
#pragma unroll
    for (int i = 0; i < L::kRows; ++i) {
      col[i] += k_s[row0 + i] * delta;
      o[i % L::kSums] += col[i] * q_s[row0 + i];
    }
    float o_all = 0.0f;
#pragma unroll
    for (int e = 0; e < L::kSums; ++e) o_all += o[e];
    if constexpr (L::kSplit == 2) o_all += __shfl_xor_sync(0xffffffffu, o_all, 1);
    if (column && row0 == 0) out[(static_cast<int64_t>(t) * nv + h) * dv + j] = o_all;
    if (column && batch.checkpoint_slots && batch.checkpoint_slots[t] >= 0) {
      float* kept = state_base + static_cast<int64_t>(batch.checkpoint_slots[t]) * nv * DK * dv + head_offset;
#pragma unroll
      for (int i = 0; i < L::kRows; ++i) kept[i * dv] = col[i];
    }
  }
  if (column) {
#pragma unroll
    for (int i = 0; i < L::kRows; ++i) state[i * dv] = col[i];
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
  if (batch.num_seqs == 0 || batch.num_tokens == 0) return;
  // Chunks: enough for a sequence holding all T tokens (a decode step has one).
  const dim3 grid(static_cast<unsigned>(ceil_div(channels, int64_t{kConvThreads})),
                  static_cast<unsigned>(batch.num_seqs),
                  static_cast<unsigned>(ceil_div(int64_t{batch.num_tokens}, int64_t{kConvChunk})));
  launch_kernel(causal_conv1d_kernel, grid, kConvThreads, 0, stream, x, weight, conv_state, batch, channels, kernel,
                out);
}

bool gated_delta_rule_supported(const GdnShape& p) {
  const int dk = p.k_head_dim;
  return (dk == 16 || dk == 32 || dk == 64 || dk == 128) && p.v_head_dim >= 1 && p.v_head_dim <= 256 &&
         p.num_k_heads > 0 && p.num_v_heads % p.num_k_heads == 0;
}

void launch_gated_delta_rule(const float* qkv, const float* ba, const float* a_log, const float* dt_bias, float* state,
                             const GdnBatch& batch, const GdnShape& p, float* out, cudaStream_t stream,
                             bool recurrent_only) {
  RS_CHECK(gated_delta_rule_supported(p), "gated_delta_rule: key head dim {} / value head dim {} unsupported",
           p.k_head_dim, p.v_head_dim);
  if (batch.num_seqs == 0) return;
  // Steps that prefill (more tokens than sequences) run the chunked form, as the CPU backend does; decode steps and
  // verify steps (whose per-token checkpoints need the state after every token) the recurrent one.
  if (!recurrent_only && batch.checkpoint_slots == nullptr && batch.num_tokens > batch.num_seqs) {
    launch_gated_delta_rule_chunked(qkv, ba, a_log, dt_bias, state, batch, p, out, stream);
    return;
  }
  const auto launch = [&](auto kernel, int columns_per_warp) {
    const int64_t col_blocks = ceil_div(int64_t{p.v_head_dim}, int64_t{columns_per_warp});
    const dim3 grid(static_cast<unsigned>(p.num_v_heads * col_blocks), static_cast<unsigned>(batch.num_seqs));
    launch_kernel(kernel, grid, 32, 0, stream, qkv, ba, a_log, dt_bias, state, batch, p, out);
  };
  switch (p.k_head_dim) {  // the released models use 128; the small sizes serve tiny test checkpoints
    case 16: launch(gated_delta_rule_kernel<16>, DeltaRuleLayout<16>::kColumns); break;
    case 32: launch(gated_delta_rule_kernel<32>, DeltaRuleLayout<32>::kColumns); break;
    case 64: launch(gated_delta_rule_kernel<64>, DeltaRuleLayout<64>::kColumns); break;
    default: launch(gated_delta_rule_kernel<128>, DeltaRuleLayout<128>::kColumns); break;
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
