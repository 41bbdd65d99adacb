// The gated delta rule in its chunked form for prefill (torch_chunk_gated_delta_rule, as the CPU backend runs it):
// chunks of 64 tokens from the step's first token of each sequence, f32 on CUDA cores.
//
// A block owns (sequence, value head, 32 state columns) and walks the sequence's chunks in order, with its 32 columns
// of the head's state S [dk][dv] in shared memory. Per chunk, with q, k L2-normalised (q scaled by dk^-0.5), beta and
// the cumulative log decay cum:
//   ut[i][j]  = beta_i (k_i . k_j) e^(cum_i - cum_j), j < i;   attn[i][j] = (q_i . k_j) e^(cum_i - cum_j), j <= i
//   (I + ut) W = k beta e^cum,  (I + ut) U = v beta            (forward substitution, one column per thread)
//   v_new = U - W S;   o = (q e^cum) S + attn v_new;   S = e^(cum_last) S + sum_i k_i e^(cum_last - cum_i) v_new_i^T
// ut, attn and W do not depend on the columns, so the dv / 32 blocks of a head each compute them: 4 x the smallest
// share of the work for 4 x the blocks, which a single prefill needs to fill the GPU.
#include <algorithm>

#include "backend/cuda/cuda_check.cuh"
#include "backend/cuda/kernels/device_utils.cuh"
#include "backend/cuda/kernels/kernels.cuh"
#include "backend/cuda/kernels/launch.cuh"

namespace rs::cuda {
namespace {

constexpr int kC = 64;         // tokens per chunk (transformers' chunk_size)
constexpr int kCols = 32;      // state columns per block (one per lane for loads)
constexpr int kPad = kC + 4;   // row stride of the transposed [*, kC] tiles: float4-aligned, fewer bank conflicts
constexpr int kThreads = 256;  // 16 x 16 tiles of 4 x 4 cover the 64 x 64 chunk matrices
constexpr float kL2Eps = 1e-6f;

template <int DK>
constexpr size_t chunked_smem_floats() {
  return 3 * DK * kPad + kC * kC + kC * kPad + kC * kCols + DK * kCols + 4 * kC;
}

template <int DK>
__global__ void __launch_bounds__(kThreads)
    gated_delta_chunked_kernel(const float* qkv, const float* ba, const float* a_log, const float* dt_bias,
                               float* state_base, GdnBatch batch, GdnShape p, float* out) {
  pdl_enter();
  extern __shared__ float4 smem_raw[];
  float* q_t = reinterpret_cast<float*>(smem_raw);  // [DK][kPad] q (normalised, scaled), transposed
  float* k_t = q_t + DK * kPad;                     // [DK][kPad] k (normalised), transposed
  float* w_t = k_t + DK * kPad;                     // [DK][kPad] W, transposed
  float* ut = w_t + DK * kPad;                      // [kC][kC]
  float* attn_t = ut + kC * kC;                     // [kC][kPad] attn transposed: attn_t[j][i]
  float* u = attn_t + kC * kPad;                    // [kC][kCols] v beta, then U, then v_new
  float* S = u + kC * kCols;                        // [DK][kCols]
  float* beta = S + DK * kCols;                     // [kC]
  float* cum = beta + kC;                           // [kC] g, then its running sum
  float* e_cum = cum + kC;                          // [kC] e^cum
  float* e_to_end = e_cum + kC;                     // [kC] e^(cum_last - cum)

  const int nv = p.num_v_heads, dv = p.v_head_dim, col_blocks = (dv + kCols - 1) / kCols;
  const int h = blockIdx.x / col_blocks, col0 = (blockIdx.x % col_blocks) * kCols;
  const int s = blockIdx.y, tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int32_t slot = batch.state_slots[s];
  const int32_t begin = batch.seq_token_start[s], end = batch.seq_token_start[s + 1];
  if (slot < 0 || begin == end) return;  // block-uniform
  const int64_t key_dim = static_cast<int64_t>(p.num_k_heads) * DK, width = 2 * key_dim + int64_t{nv} * dv;
  const int k_head = h / (nv / p.num_k_heads);
  const float q_scale = rsqrtf(static_cast<float>(DK)), decay_rate = -expf(a_log[h]), bias = dt_bias[h];
  const bool fresh = batch.positions[begin] == 0;
  float* state = state_base + (static_cast<int64_t>(slot) * nv + h) * DK * dv;
  for (int idx = tid; idx < DK * kCols; idx += kThreads) {
    const int r = idx / kCols, c = col0 + idx % kCols;
    S[idx] = !fresh && c < dv ? state[r * dv + c] : 0.0f;
  }

  for (int32_t c0 = begin; c0 < end; c0 += kC) {
    const int len = min(kC, end - c0);
    // 1. A warp per token row: q and k normalised and transposed, v's columns, beta and g (zeros past len, which
    //    equals the reference's zero padding of a short last chunk).
    for (int i = warp; i < kC; i += kThreads / 32) {
      const float* row = qkv + static_cast<int64_t>(c0 + i) * width;
      constexpr int kPerLane = (DK + 31) / 32;
      float q[kPerLane], k[kPerLane], qq = 0.0f, kk = 0.0f;
#pragma unroll
      for (int e = 0; e < kPerLane; ++e) {
        const int d = lane + 32 * e;
        q[e] = i < len && d < DK ? row[k_head * DK + d] : 0.0f;
        k[e] = i < len && d < DK ? row[key_dim + k_head * DK + d] : 0.0f;
        qq += q[e] * q[e], kk += k[e] * k[e];
      }
      const float q_mul = q_scale / sqrtf(warp_sum(qq) + kL2Eps), k_inv = 1.0f / sqrtf(warp_sum(kk) + kL2Eps);
#pragma unroll
      for (int e = 0; e < kPerLane; ++e) {
        const int d = lane + 32 * e;
        if (d < DK) q_t[d * kPad + i] = q[e] * q_mul, k_t[d * kPad + i] = k[e] * k_inv;
      }
      u[i * kCols + lane] =
          i < len && col0 + lane < dv ? row[2 * key_dim + static_cast<int64_t>(h) * dv + col0 + lane] : 0.0f;
      if (lane == 0) {
        const float* b_a = ba + static_cast<int64_t>(c0 + i) * 2 * nv;
        const float a = i < len ? b_a[nv + h] + bias : 0.0f;
        beta[i] = i < len ? 1.0f / (1.0f + expf(-b_a[h])) : 0.0f;
        cum[i] = i < len ? decay_rate * (a > 20.0f ? a : log1pf(expf(a))) : 0.0f;  // torch's softplus threshold
      }
    }
    __syncthreads();
    if (warp == 0) {  // running sum of g over the chunk (two tokens per lane), then its exponentials
      const float g0 = cum[2 * lane], g1 = cum[2 * lane + 1];
      float inclusive = g0 + g1;
#pragma unroll
      for (int offset = 1; offset < 32; offset <<= 1) {
        const float y = __shfl_up_sync(0xffffffffu, inclusive, offset);
        if (lane >= offset) inclusive += y;
      }
      const float c_a = inclusive - g1, c_b = inclusive, last = __shfl_sync(0xffffffffu, inclusive, 31);
      cum[2 * lane] = c_a, cum[2 * lane + 1] = c_b;
      e_cum[2 * lane] = expf(c_a), e_cum[2 * lane + 1] = expf(c_b);
      e_to_end[2 * lane] = expf(last - c_a), e_to_end[2 * lane + 1] = expf(last - c_b);
    }
    __syncthreads();

    // 2. ut and attn over the lower triangle, a 4 x 4 tile per thread.
    {
      const int ti = tid / 16, tj = tid % 16;
      float kk[4][4] = {}, qk[4][4] = {};
      if (tj <= ti) {
#pragma unroll 4
        for (int d = 0; d < DK; ++d) {
          const float4 ki = *reinterpret_cast<const float4*>(k_t + d * kPad + 4 * ti);
          const float4 kj = *reinterpret_cast<const float4*>(k_t + d * kPad + 4 * tj);
          const float4 qi = *reinterpret_cast<const float4*>(q_t + d * kPad + 4 * ti);
          const float a_k[4] = {ki.x, ki.y, ki.z, ki.w}, a_q[4] = {qi.x, qi.y, qi.z, qi.w};
          const float b_k[4] = {kj.x, kj.y, kj.z, kj.w};
#pragma unroll
          for (int a = 0; a < 4; ++a)
#pragma unroll
            for (int b = 0; b < 4; ++b) kk[a][b] += a_k[a] * b_k[b], qk[a][b] += a_q[a] * b_k[b];
        }
      }
#pragma unroll
      for (int a = 0; a < 4; ++a)
#pragma unroll
        for (int b = 0; b < 4; ++b) {
          const int i = 4 * ti + a, j = 4 * tj + b;
          const float decay = j <= i ? expf(cum[i] - cum[j]) : 0.0f;
          ut[i * kC + j] = j < i ? beta[i] * kk[a][b] * decay : 0.0f;
          attn_t[j * kPad + i] = qk[a][b] * decay;
        }
    }
    __syncthreads();

    // 3. Forward substitution, a column per thread: W's DK columns (k beta e^cum), then U's 32 (v beta).
    if (tid < DK + kCols) {
      const bool is_w = tid < DK;
      float x[kC];
#pragma unroll
      for (int i = 0; i < kC; ++i) {
        const float rhs = is_w ? k_t[tid * kPad + i] * beta[i] * e_cum[i] : u[i * kCols + (tid - DK)] * beta[i];
        float acc0 = 0.0f, acc1 = 0.0f;
#pragma unroll
        for (int m = 0; m + 1 < i; m += 2) acc0 += ut[i * kC + m] * x[m], acc1 += ut[i * kC + m + 1] * x[m + 1];
        if (i % 2 == 1) acc0 += ut[i * kC + i - 1] * x[i - 1];
        x[i] = rhs - (acc0 + acc1);
      }
#pragma unroll
      for (int i = 0; i < kC; ++i) {
        if (is_w)
          w_t[tid * kPad + i] = x[i];
        else
          u[i * kCols + (tid - DK)] = x[i];
      }
    }
    __syncthreads();

    // 4. v_new = U - W S and o = (q e^cum) S + attn v_new, 4 rows x 2 columns per thread.
    {
      const int ri = tid / 16, ci = tid % 16;
      float vs[4][2] = {}, qs[4][2] = {};
#pragma unroll 4
      for (int r = 0; r < DK; ++r) {
        const float4 w4 = *reinterpret_cast<const float4*>(w_t + r * kPad + 4 * ri);
        const float4 q4 = *reinterpret_cast<const float4*>(q_t + r * kPad + 4 * ri);
        const float2 s2 = *reinterpret_cast<const float2*>(S + r * kCols + 2 * ci);
        const float a_w[4] = {w4.x, w4.y, w4.z, w4.w}, a_q[4] = {q4.x, q4.y, q4.z, q4.w}, b_s[2] = {s2.x, s2.y};
#pragma unroll
        for (int a = 0; a < 4; ++a)
#pragma unroll
          for (int b = 0; b < 2; ++b) vs[a][b] += a_w[a] * b_s[b], qs[a][b] += a_q[a] * b_s[b];
      }
      float o[4][2];
#pragma unroll
      for (int a = 0; a < 4; ++a)
#pragma unroll
        for (int b = 0; b < 2; ++b) {
          const int i = 4 * ri + a, c = 2 * ci + b;
          u[i * kCols + c] -= vs[a][b];  // this thread's own entries: no other thread reads them before the barrier
          o[a][b] = e_cum[i] * qs[a][b];
        }
      __syncthreads();
      for (int m = 0; m < 4 * ri + 4; ++m) {
        const float4 p4 = *reinterpret_cast<const float4*>(attn_t + m * kPad + 4 * ri);
        const float2 v2 = *reinterpret_cast<const float2*>(u + m * kCols + 2 * ci);
        const float a_p[4] = {p4.x, p4.y, p4.z, p4.w};
#pragma unroll
        for (int a = 0; a < 4; ++a) o[a][0] += a_p[a] * v2.x, o[a][1] += a_p[a] * v2.y;
      }
#pragma unroll
      for (int a = 0; a < 4; ++a)
#pragma unroll
        for (int b = 0; b < 2; ++b) {
          const int i = 4 * ri + a, c = col0 + 2 * ci + b;
          if (i < len && c < dv) out[(static_cast<int64_t>(c0 + i) * nv + h) * dv + c] = o[a][b];
        }
    }
    __syncthreads();  // S is read above and rewritten below

    // 5. S = e^(cum_last) S + sum_i (k_i e^(cum_last - cum_i)) v_new_i^T, 4 x 4 per thread.
    const float chunk_decay = e_cum[kC - 1];
    for (int tile = tid; tile < (DK / 4) * (kCols / 4); tile += kThreads) {
      const int rt = tile / (kCols / 4), ct = tile % (kCols / 4);
      float acc[4][4];
#pragma unroll
      for (int a = 0; a < 4; ++a) {
        const float4 s4 = *reinterpret_cast<const float4*>(S + (4 * rt + a) * kCols + 4 * ct);
        acc[a][0] = chunk_decay * s4.x, acc[a][1] = chunk_decay * s4.y;
        acc[a][2] = chunk_decay * s4.z, acc[a][3] = chunk_decay * s4.w;
      }
      for (int i = 0; i < len; ++i) {
        const float4 v4 = *reinterpret_cast<const float4*>(u + i * kCols + 4 * ct);
        const float f = e_to_end[i];
#pragma unroll
        for (int a = 0; a < 4; ++a) {
          const float kr = k_t[(4 * rt + a) * kPad + i] * f;
          acc[a][0] += kr * v4.x, acc[a][1] += kr * v4.y, acc[a][2] += kr * v4.z, acc[a][3] += kr * v4.w;
        }
      }
#pragma unroll
      for (int a = 0; a < 4; ++a)
        *reinterpret_cast<float4*>(S + (4 * rt + a) * kCols + 4 * ct) =
            make_float4(acc[a][0], acc[a][1], acc[a][2], acc[a][3]);
    }
    __syncthreads();  // the next chunk rewrites every tile
  }
  for (int idx = tid; idx < DK * kCols; idx += kThreads) {
    const int r = idx / kCols, c = col0 + idx % kCols;
    if (c < dv) state[r * dv + c] = S[idx];
  }
}

template <int DK>
void launch_chunked(const float* qkv, const float* ba, const float* a_log, const float* dt_bias, float* state,
                    const GdnBatch& batch, const GdnShape& p, float* out, cudaStream_t stream) {
  constexpr size_t smem = chunked_smem_floats<DK>() * sizeof(float);
  static const bool configured = [] {
    RS_CUDA_CHECK(cudaFuncSetAttribute(gated_delta_chunked_kernel<DK>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(smem)));
    return true;
  }();
  (void)configured;
  const int64_t col_blocks = ceil_div(int64_t{p.v_head_dim}, int64_t{kCols});
  const dim3 grid(static_cast<unsigned>(p.num_v_heads * col_blocks), static_cast<unsigned>(batch.num_seqs));
  launch_kernel(gated_delta_chunked_kernel<DK>, grid, kThreads, smem, stream, qkv, ba, a_log, dt_bias, state, batch, p,
                out);
}

}  // namespace

void launch_gated_delta_rule_chunked(const float* qkv, const float* ba, const float* a_log, const float* dt_bias,
                                     float* state, const GdnBatch& batch, const GdnShape& p, float* out,
                                     cudaStream_t stream) {
  RS_CHECK(batch.checkpoint_slots == nullptr, "the chunked delta rule keeps no per-token checkpoints");
  if (batch.num_seqs == 0) return;
  switch (p.k_head_dim) {
    case 16: launch_chunked<16>(qkv, ba, a_log, dt_bias, state, batch, p, out, stream); break;
    case 32: launch_chunked<32>(qkv, ba, a_log, dt_bias, state, batch, p, out, stream); break;
    case 64: launch_chunked<64>(qkv, ba, a_log, dt_bias, state, batch, p, out, stream); break;
    default: launch_chunked<128>(qkv, ba, a_log, dt_bias, state, batch, p, out, stream); break;
  }
}

}  // namespace rs::cuda
