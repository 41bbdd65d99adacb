// MXFP4 and int4 GEMV on tensor cores for chunks of 1-8 activation rows (decode of MoE experts and of integer
// checkpoints, the bf16 fast path).
//
// Why not the SIMT GEMV: decoding an E2M1 code to f32 costs ~10 integer instructions, so that kernel issues ~20 per
// weight byte and reads MXFP4 at ~0.7 TB/s (gpt-oss-20b batch 1: 1.95 of 3.8 ms per step). Here a code pair becomes a
// bf16x2 in 4 integer instructions and one bf16 multiply folds in the block scale; the dot products run on mma.sync,
// whose 8 columns hold up to 8 activation rows at no extra weight traffic. Measured on the H200 (session-10 lab,
// gpt-oss-20b's 48 expert launches per step): 1.67 ms -> 0.67 ms.
//
// Layout: a warp owns 16 weight rows (an mma's M) and a K-slice; the KS warps of a block share rows and split K.
// Thread (g = lane / 4, q = lane % 4) loads one 16-byte MXFP4 block (32 codes) of rows g and g + 8 per step: block
// 4j + q. A 32-bit word of 8 codes decodes to the pairs (3,7), (2,6), (1,5), (0,4) - the K order inside a word is
// permuted, identically for the activations, which each block stages in shared memory as bf16 in that order. The sum
// over K is unchanged. Accumulation is f32 in the mma.
#include <algorithm>

#include "backend/cuda/cuda_check.cuh"
#include "backend/cuda/kernels/launch.cuh"
#include "backend/cuda/kernels/mma.cuh"
#include "backend/cuda/kernels/weight_decode.cuh"

namespace rs::cuda {
namespace {

constexpr int kWarps = 8, kThreads = kWarps * 32;
constexpr int kMaxRows = 8;                      // activation rows per chunk: the mma's N
constexpr int kReduceBytes = kWarps * 32 * 16;   // the K-split's partial sums (reuses the staging buffer)
constexpr uint32_t kBf16x2Pow126 = 0x7E807E80u;  // bf16x2 {2^126, 2^126}

// Word of 8 E2M1 codes (element i in nibble i) -> bf16x2 pairs (3,7), (2,6), (1,5), (0,4), each code's value times
// 2^-126: sign to bit 15, (e1 e0 m) to bits 8..6, so that exponent e reads as 2^(e-127) and e = 0 as the subnormal
// m * 2^-127, exactly 2^-126 times E2M1's 2^(e-1) (1 + m/2) and m / 2.
__device__ __forceinline__ void fp4x8_to_bf16x2(uint32_t word, uint32_t (&pairs)[4]) {
#pragma unroll
  for (int d = 0; d < 4; ++d) {
    pairs[d] = (word & 0x80008000u) | ((word >> 6) & 0x01C001C0u);
    word <<= 4;
  }
}

__device__ __forceinline__ uint32_t bf16x2_mul(uint32_t a, uint32_t b) {
  const __nv_bfloat162 r =
      __hmul2(*reinterpret_cast<const __nv_bfloat162*>(&a), *reinterpret_cast<const __nv_bfloat162*>(&b));
  return *reinterpret_cast<const uint32_t*>(&r);
}

// The 16 codes a thread holds for one row (4 words) times 2^(s - 127), E8M0 scale byte s, as 16 bf16x2 pairs. One
// multiply by 2^(s - 1) when s <= 128 (the product stays a bf16 normal or exact subnormal); larger scales (blocks with
// values past 16, not seen in checkpoints) take 2^126 and 2^(s - 127) apart so that neither factor overflows.
__device__ __forceinline__ void decode_block(const uint4& v, uint32_t s, uint32_t (&pairs)[4][4]) {
  const uint32_t words[4] = {v.x, v.y, v.z, v.w};
  if (s <= 128u) {
    const uint32_t factor = ((s + 126u) << 7) * 0x10001u;
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      fp4x8_to_bf16x2(words[w], pairs[w]);
#pragma unroll
      for (int d = 0; d < 4; ++d) pairs[w][d] = bf16x2_mul(pairs[w][d], factor);
    }
  } else {
    const uint32_t factor = (s << 7) * 0x10001u;
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      fp4x8_to_bf16x2(words[w], pairs[w]);
#pragma unroll
      for (int d = 0; d < 4; ++d) pairs[w][d] = bf16x2_mul(bf16x2_mul(pairs[w][d], kBf16x2Pow126), factor);
    }
  }
}

// int4 (kInt4: w = s q + b per group of at least 32, so one (scale, bias) pair per 16-byte block): a word's codes in
// the same pair order as fp4x8_to_bf16x2, each pair 128 + q by the bf16 exponent trick (exact), less 128, times s plus
// b in one fused bf16 multiply-add (s and b rounded to bf16: MLX stores them so). Four instructions per two weights.
__device__ __forceinline__ void decode_int4_block(const uint4& v, float2 pair, uint32_t (&pairs)[4][4]) {
  const __nv_bfloat162 scale = __float2bfloat162_rn(pair.x), bias = __float2bfloat162_rn(pair.y);
  const __nv_bfloat162 offset = __float2bfloat162_rn(128.0f);
  const uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int w = 0; w < 4; ++w) {
#pragma unroll
    for (int d = 0; d < 4; ++d) {
      const uint32_t biased = (((words[w] << (4 * d)) >> 12) & 0x000F000Fu) | 0x43004300u;  // (128 + q_lo, 128 + q_hi)
      const __nv_bfloat162 q = __hsub2(*reinterpret_cast<const __nv_bfloat162*>(&biased), offset);
      const __nv_bfloat162 value = __hfma2(q, scale, bias);
      pairs[w][d] = *reinterpret_cast<const uint32_t*>(&value);
    }
  }
}

// f32 activations (8 consecutive) -> the 4 bf16x2 pairs of one word in decode order.
__device__ __forceinline__ uint4 pack_word_order(const float* x) {
  const float4 lo = *reinterpret_cast<const float4*>(x), hi = *reinterpret_cast<const float4*>(x + 4);
  return make_uint4(pack_bf16x2(lo.w, hi.w), pack_bf16x2(lo.z, hi.z), pack_bf16x2(lo.y, hi.y), pack_bf16x2(lo.x, hi.x));
}

// Weight rows behind the 16 mma rows of a tile whose first output feature is f0. Gated outputs: mma rows 0-7 are the
// gate rows of features f0..f0+7 and rows 8-15 their up rows (so a thread's accumulators pair them); plain: features
// f0..f0+15. Features past the end read the last row and are never stored.
struct TileRows {
  int64_t row[2];    // weight row of mma rows g and g + 8
  bool up_table[2];  // row comes from GroupedWeights::up_table (kSilu over two weights)
};

__device__ __forceinline__ TileRows tile_rows(const LinearArgs& a, int64_t f0, int g) {
  TileRows t{};
  const bool pair = a.pair_act != PairActivation::kNone;
  const bool two_tables = pair && a.w.up_table != nullptr;
  if (pair || a.glu_offset > 0) {
    const int64_t f = min(f0 + g, a.out_features - 1);
    t.row[0] = pair && !two_tables ? 2 * f : f;
    t.row[1] = two_tables ? f : pair ? 2 * f + 1 : f + a.glu_offset;
    t.up_table[1] = two_tables;
  } else {
    t.row[0] = min(f0 + g, a.out_features - 1);
    t.row[1] = min(f0 + g + 8, a.out_features - 1);
  }
  return t;
}

// Steps per load batch of the load-ahead variant (double-buffered: 2 x kAheadSteps steps of weights in registers).
constexpr int kAheadSteps = 2;

// One batch of a thread's weights: U steps of rows g and g + 8 (a 16-byte block each, its scale or pair).
template <WeightFormat F, int U>
struct StepBatch {
  uint4 v[U][2];
  uint32_t sc[U][2];  // kMxfp4: E8M0 scale bytes
  float2 pr[U][2];    // kInt4: (scale, bias)
};

// Weight codes are read once per step: the load-ahead variant skips L1 allocation for them, so that the scales' lines
// stay.
template <bool kNoL1>
__device__ __forceinline__ uint4 load_stream(const uint4* ptr) {
  if constexpr (!kNoL1) return __ldg(ptr);
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(ptr));
  return v;
}

// Steps j0 .. j0 + U - 1 (of 4 blocks each: this thread's block 4j + q); zeros (scale 2^0, pair (0, 0)) past the
// slice or the row.
template <WeightFormat F, int U, bool kNoL1>
__device__ __forceinline__ void load_batch(StepBatch<F, U>& b, const uint4* const (&w)[2], const uint8_t* const (&s)[2],
                                           const float2* const (&p)[2], int vec_shift, int j0, int j_end, int q,
                                           int blocks) {
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int blk = 4 * (j0 + u) + q;
    const bool in = j0 + u < j_end && blk < blocks;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      b.v[u][h] = in ? load_stream<kNoL1>(w[h] + blk) : make_uint4(0, 0, 0, 0);
      if constexpr (F == WeightFormat::kMxfp4)
        b.sc[u][h] = in ? static_cast<uint32_t>(__ldg(s[h] + blk)) : 127u;
      else
        b.pr[u][h] = in ? __ldg(p[h] + (blk >> vec_shift)) : make_float2(0.0f, 0.0f);
    }
  }
}

// One step's products: rows g and g + 8's 16-byte blocks decoded to bf16 and multiplied by activation row g's 32
// staged values (zeros where `x_in` is false: past the row or the chunk).
template <WeightFormat F>
__device__ __forceinline__ void step_products(float (&acc)[4], const uint4 (&v)[2], const uint32_t (&sc)[2],
                                              const float2 (&pr)[2], const uint4* xs, bool x_in, int x_word) {
  uint4 xv[4];  // this thread's activation row g (the mma's column)
#pragma unroll
  for (int k = 0; k < 4; ++k) xv[k] = x_in ? xs[x_word + k] : make_uint4(0, 0, 0, 0);
  uint32_t pa[4][4], pb[4][4];
  if constexpr (F == WeightFormat::kMxfp4) {
    decode_block(v[0], sc[0], pa);
    decode_block(v[1], sc[1], pb);
  } else {
    decode_int4_block(v[0], pr[0], pa);
    decode_int4_block(v[1], pr[1], pb);
  }
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const uint32_t a0[4] = {pa[k][0], pb[k][0], pa[k][1], pb[k][1]}, a1[4] = {pa[k][2], pb[k][2], pa[k][3], pb[k][3]};
    mma_bf16(acc, a0, xv[k].x, xv[k].y);
    mma_bf16(acc, a1, xv[k].z, xv[k].w);
  }
}

// kAhead: weights loaded a batch of kAheadSteps steps ahead of the products (the first batch before the activations
// are staged); otherwise a step's weights are loaded just before its products, which needs fewer registers.
template <WeightFormat F, int KS, bool kAhead>
__global__ void __launch_bounds__(kThreads, kAhead ? 2 : 0) gemv_mma_kernel(LinearArgs a) {
  extern __shared__ __align__(16) unsigned char smem[];
  auto* xs = reinterpret_cast<uint4*>(smem);  // [rows][in / 8] words of bf16 pairs in decode order
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, part = warp % KS, g = lane / 4, q = lane % 4;
  const bool gated = a.pair_act != PairActivation::kNone || a.glu_offset > 0;
  const int64_t f0 = (static_cast<int64_t>(blockIdx.x) * (kWarps / KS) + warp / KS) * (gated ? 8 : 16);
  pdl_enter();  // the chunk list and the activations come from earlier kernels
  int group, count;
  int64_t first_row;
  if (!block_chunk(a.rows, group, first_row, count)) return;  // the whole block: no barrier below is skipped

  const int blocks = static_cast<int>(a.in_features / 32), steps = (blocks + 3) / 4, words = blocks * 4;
  const int slice = (steps + KS - 1) / KS, j_begin = part * slice, j_end = min(steps, j_begin + slice);
  const TileRows rows = tile_rows(a, f0, g);
  const uint4* w[2] = {nullptr, nullptr};
  const uint8_t* s[2] = {nullptr, nullptr};
  const float2* p[2] = {nullptr,
                        nullptr};  // kInt4: the rows' (scale, bias) pairs (one weight group: dense layers only)
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const bool up = rows.up_table[h];
    w[h] = static_cast<const uint4*>(up ? a.w.up_table[group] : group_weight(a.w, group)) + rows.row[h] * blocks;
    if constexpr (F == WeightFormat::kMxfp4)
      s[h] = (up ? a.w.up_scale_table[group] : group_scales(a.w, group)) + rows.row[h] * blocks;
    else
      p[h] = a.w.affine.pairs + rows.row[h] * a.w.affine.groups;
  }
  // Load-ahead: weights for U steps at a time, one batch ahead of the products, so that each warp keeps up to
  // 2 x U 16-byte loads per row pair in flight (the GEMV is bound by bytes in flight, not by its arithmetic).
  constexpr int U = kAhead ? kAheadSteps : 1;
  StepBatch<F, U> cur, next;
  if constexpr (kAhead) load_batch<F, U, true>(cur, w, s, p, a.w.affine.vec_shift, j_begin, j_end, q, blocks);
  (void)next;
  // Stage the chunk's activation rows as bf16 in decode order.
  for (int i = threadIdx.x; i < count * words; i += kThreads) {
    const int t = i / words, k = i % words;
    const int64_t r = first_row + t;
    xs[i] = pack_word_order(a.x + (a.x_rows ? a.x_rows[r] : r) * a.x_stride + 8 * k);
  }
  __syncthreads();

  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  if constexpr (kAhead) {
    for (int j0 = j_begin; j0 < j_end; j0 += U) {
      load_batch<F, U, true>(next, w, s, p, a.w.affine.vec_shift, j0 + U, j_end, q, blocks);
#pragma unroll
      for (int u = 0; u < U; ++u) {
        if (j0 + u >= j_end) break;  // warp-uniform: the mma is collective
        const int blk = 4 * (j0 + u) + q;
        step_products<F>(acc, cur.v[u], cur.sc[u], cur.pr[u], xs, blk < blocks && g < count, g * words + 4 * blk);
      }
      cur = next;
    }
  } else {
    for (int j = j_begin; j < j_end; ++j) {
      const int blk = 4 * j + q;
      const bool in = blk < blocks;
      uint4 v[2] = {make_uint4(0, 0, 0, 0), make_uint4(0, 0, 0, 0)};
      uint32_t sc[2] = {127u, 127u};
      float2 pr[2] = {make_float2(0.0f, 0.0f), make_float2(0.0f, 0.0f)};
      if (in) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          v[h] = __ldg(w[h] + blk);
          if constexpr (F == WeightFormat::kMxfp4)
            sc[h] = __ldg(s[h] + blk);
          else
            pr[h] = __ldg(p[h] + (blk >> a.w.affine.vec_shift));
        }
      }
      step_products<F>(acc, v, sc, pr, xs, in && g < count, g * words + 4 * blk);
    }
  }
  if constexpr (KS > 1) {  // partial sums of the K-slices, added in slice order (deterministic)
    __syncthreads();       // the staging buffer becomes the reduction buffer
    auto* partial = reinterpret_cast<float4*>(smem);
    partial[warp * 32 + lane] = make_float4(acc[0], acc[1], acc[2], acc[3]);
    __syncthreads();
    if (part != 0) return;
#pragma unroll
    for (int p = 1; p < KS; ++p) {
      const float4 o = partial[(warp + p) * 32 + lane];
      acc[0] += o.x, acc[1] += o.y, acc[2] += o.z, acc[3] += o.w;
    }
  }
  // Accumulators: c0, c1 = mma row g, activation rows 2q, 2q + 1; c2, c3 = mma row g + 8.
  const int64_t f = f0 + g;
  const float b0 = group_bias(a.w, group, rows.row[0]);
  const float b1 = rows.up_table[1] ? 0.0f : group_bias(a.w, group, rows.row[1]);
#pragma unroll
  for (int c = 0; c < 2; ++c) {
    const int t = 2 * q + c;
    if (t >= count) break;
    float* out = a.out + (first_row + t) * a.out_stride;
    if (gated) {
      if (f >= a.out_features) continue;
      const float gate = acc[c] + b0, up = acc[2 + c] + b1;
      out[f] = a.pair_act != PairActivation::kNone
                   ? pair_activation(a.pair_act, gate, up, a.swiglu_alpha, a.swiglu_limit)
                   : silu_times(gate, up);
    } else {
      if (f < a.out_features) out[f] = acc[c] + b0;
      if (f + 8 < a.out_features) out[f + 8] = acc[2 + c] + b1;
    }
  }
}

size_t smem_bytes(const LinearArgs& a, int32_t rows_per_chunk) {
  return std::max<size_t>(static_cast<size_t>(rows_per_chunk) * static_cast<size_t>(a.in_features) * 2, kReduceBytes);
}

int64_t tile_count(const LinearArgs& a) {
  const bool gated = a.pair_act != PairActivation::kNone || a.glu_offset > 0;
  return ceil_div(a.out_features, gated ? 8 : 16);
}

unsigned chunk_count(const LinearArgs& a) {
  return static_cast<unsigned>(a.rows.list ? a.rows.max_chunks : ceil_div(a.rows.total_rows, a.rows.chunk_rows));
}

template <WeightFormat F, int KS, bool kAhead>
void launch_split(const LinearArgs& a, int32_t rows_per_chunk, cudaStream_t stream) {
  static const bool opted_in = [] {
    RS_CUDA_CHECK(cudaFuncSetAttribute(gemv_mma_kernel<F, KS, kAhead>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(kGemvMmaMaxSmem)));
    return true;
  }();
  (void)opted_in;
  const dim3 grid(static_cast<unsigned>(ceil_div(tile_count(a), kWarps / KS)), chunk_count(a));
  launch_kernel(gemv_mma_kernel<F, KS, kAhead>, grid, kThreads, smem_bytes(a, rows_per_chunk), stream, a);
}

// Warps that keep an H100's 132 SMs streaming (16 each): with load-ahead, layers of at least this many tiles take
// fewer K-slices, so that fewer blocks stage the same activations (Qwen3-8B's gate|up: 1,536 tiles, 2 slices).
constexpr int64_t kFillWarps = 2048;

template <WeightFormat F, bool kAhead>
void launch_with(const LinearArgs& a, int ks, int32_t rows_per_chunk, cudaStream_t stream) {
  switch (ks) {
    case 8: return launch_split<F, 8, kAhead>(a, rows_per_chunk, stream);
    case 4: return launch_split<F, 4, kAhead>(a, rows_per_chunk, stream);
    case 2: return launch_split<F, 2, kAhead>(a, rows_per_chunk, stream);
    default: return launch_split<F, 1, kAhead>(a, rows_per_chunk, stream);
  }
}

// Load-ahead pays for int4 chunks of 2+ rows (Qwen3-8B MLX 4-bit on an H100, docs/notes/int4.md: batch 8 1,372 ->
// 1,530 tok/s, batch 16 1,616 -> 2,024) but not for single rows, whose extra registers halve the blocks per SM (batch
// 1: 273 -> 260; gpt-oss MXFP4 batch 1: 379 -> 367), so those keep the plain loop and its K split.
template <WeightFormat F>
void launch_steps(const LinearArgs& a, int64_t steps, int32_t rows_per_chunk, cudaStream_t stream) {
  int ks = steps >= 16 ? 8 : steps >= 8 ? 4 : steps >= 4 ? 2 : 1;
  if constexpr (F == WeightFormat::kInt4) {
    if (rows_per_chunk >= 2) {
      const int64_t units = tile_count(a) * chunk_count(a);
      while (ks > 1 && units * (ks / 2) >= kFillWarps) ks /= 2;
      return launch_with<F, true>(a, ks, rows_per_chunk, stream);
    }
  }
  launch_with<F, false>(a, ks, rows_per_chunk, stream);
}

}  // namespace

bool gemv_mma_supported(WeightFormat format, int64_t in_features, const float* x, int64_t x_stride,
                        int32_t rows_per_chunk) {
  const bool aligned = reinterpret_cast<uintptr_t>(x) % 16 == 0 && x_stride % 4 == 0;
  return (format == WeightFormat::kMxfp4 || format == WeightFormat::kInt4) && in_features % 32 == 0 &&
         in_features <= INT32_MAX / 4 && aligned && rows_per_chunk >= 1 && rows_per_chunk <= kMaxRows &&
         static_cast<int64_t>(rows_per_chunk) * in_features * 2 <= kGemvMmaMaxSmem;
}

void launch_gemv_mma(const LinearArgs& a, int32_t rows_per_chunk, cudaStream_t stream) {
  RS_CHECK(gemv_mma_supported(a.format, a.in_features, a.x, a.x_stride, rows_per_chunk) && a.rows.chunk_rows >= 1 &&
               a.rows.chunk_rows <= rows_per_chunk,
           "gemv_mma: format {} K {} rows {} (chunks of {})", static_cast<int>(a.format), a.in_features, rows_per_chunk,
           a.rows.chunk_rows);
  if (a.out_features == 0) return;
  // K split: as many slices as leave each warp at least two 4-block steps (gpt-oss, K = 2880: 8 slices of 3 steps;
  // the H200 lab measured 8 slices 0.67 ms, 4 slices 0.73, 2 slices 0.94 for the 48 launches of a step).
  const int64_t steps = ceil_div(a.in_features / 32, 4);
  if (a.format == WeightFormat::kInt4) return launch_steps<WeightFormat::kInt4>(a, steps, rows_per_chunk, stream);
  launch_steps<WeightFormat::kMxfp4>(a, steps, rows_per_chunk, stream);
}

}  // namespace rs::cuda
