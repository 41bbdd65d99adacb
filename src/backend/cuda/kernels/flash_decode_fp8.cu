// Decode steps over an fp8 (e4m3) KV cache on tensor cores, with no widening pass: K/V tiles land raw in shared memory
// (one byte per value, cp.async, three stages) and each warp turns its own mma fragments into f16 in registers
// (cvt e4m3x2 -> f16x2: one instruction per two values, exact). The mma runs on f16 operands, so q and the
// probabilities are rounded to f16 (11 significant bits; the bf16 path's 8): q is stored as q / 64, which keeps
// |q| up to ~4e6 finite, and the 64 returns in the softmax scale. The tile shape, key split over the 4 warps, masking,
// online softmax, split merge and sinks are flash_attention.cu's decode path.
//
// Fragments come from the byte tile by ldmatrix, which moves pairs of codes as one 16-bit element:
//  - K (B of S = Q K^T): a thread's word of key row `g`, 16-byte chunk c holds dims 16c + 4t .. 16c + 4t + 3
//    (t = lane % 4), where the mma expects k indices 2t, 2t+1 (b0) and 2t+8, 2t+9 (b1). Q is stored with that
//    permutation inside every 16-dim chunk, so each product still pairs q and k of the same dim.
//  - V (B of O += P V): ldmatrix.trans gives a thread the codes of keys 2t, 2t+1 at dims 2g, 2g+1 (g = lane / 4);
//    byte permutes split them into a fragment for dim 2g and one for dim 2g+1. O's n-tiles therefore hold every
//    other dim of a chunk; the write-out puts the dims back in order.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "backend/cuda/cuda_check.cuh"
#include "backend/cuda/kernels/flash_attention_common.cuh"
#include "backend/cuda/kernels/launch.cuh"

namespace rs::cuda {
namespace {
using namespace flash;

constexpr int kWarps = 4, kRows = 16;
constexpr float kQScale = 1.0f / 64;  // q is stored in f16 as q x kQScale

// Byte offset of 16-byte chunk `chunk` of row `row` in a [rows][D] tile of codes, XOR-swizzled so that the 8 rows an
// ldmatrix reads at one chunk fall in 8 different bank groups (rows of 64 bytes: two per 128-byte bank line).
template <int D>
__device__ __forceinline__ int code_offset(int row, int chunk) {
  constexpr int kChunks = D / 16;
  const int swizzle = kChunks >= 8 ? (row & 7) : ((row >> 1) & (kChunks - 1));
  return row * D + ((chunk ^ swizzle) << 4);
}

// Where dim p of a q row is stored in the Q tile: 16c + 4t + j -> 16c + 2t + (j & 1) + 8 (j >> 1), the k index whose
// K code sits at dim p in the thread's word (above).
__device__ __forceinline__ int q_position(int p) {
  const int j = p & 3, t = (p >> 2) & 3;
  return (p & ~15) | (2 * t + (j & 1) + 8 * (j >> 1));
}

// kStages K/V tiles in flight; kQRegs: Q's fragments live in registers (else re-read from shared memory per tile);
// kMinBlocks: blocks per SM the registers must allow.
template <int D, bool kPrepare, int kStages, bool kQRegs, int kMinBlocks>
__global__ void __launch_bounds__(kWarps * 32, kMinBlocks) flash_decode_fp8_kernel(AttentionArgs a) {
  pdl_enter();
  constexpr int kChunks = D / 16;  // 16-byte chunks of a row of codes
  extern __shared__ uint4 smem_raw[];
  uint16_t* q_s = reinterpret_cast<uint16_t*>(smem_raw);         // [kRows][D] f16, dims permuted, swizzled<D>
  uint8_t* k_raw = reinterpret_cast<uint8_t*>(q_s + kRows * D);  // [kStages][kKeys][D] codes
  uint8_t* v_raw = k_raw + kStages * kKeys * D;

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int group = a.num_heads / a.num_kv_heads;
  const int kvh = blockIdx.y, split = blockIdx.z;
  const TileSlot tile = find_tile(a.seq_token_start, a.num_seqs, kRows / group);
  if (tile.seq < 0) return;        // block-uniform: the grid is an upper bound on the tiles
  const int rows = group;          // a decode step: one token per sequence, so one token per tile
  const int key_base = 16 * warp;  // this warp's 16 keys of every 64-key tile
  const int g = lane / 4, t4 = lane % 4;
  // Every row of the tile is the same token: one key range.
  const int pos = a.positions[tile.first_token];
  const int first = a.window > 0 ? max(0, pos - a.window + 1) : 0;

  // Q rows -> the f16 tile (zeros past the last row).
  if constexpr (kPrepare) {
    __shared__ float prepare_buf[kWarps * D];
    prepare_decode_token<D, uint8_t>(
        a, tile.first_token, kvh, split, group, kRows, q_s, prepare_buf, [&](int r, int i, float v) {
          const int at = q_position(i);
          q_s[swizzled<D>(r, at / 8) + at % 8] = __half_as_ushort(__float2half_rn(v * kQScale));
        });
  } else {
    // Logical chunk lc = 2c + h of a row holds dims 16c + 4t + 2h + {0, 1}, t = 0..3.
    for (int idx = threadIdx.x; idx < kRows * (D / 8); idx += blockDim.x) {
      const int r = idx / (D / 8), lc = idx % (D / 8);
      uint32_t words[4] = {0, 0, 0, 0};
      if (r < rows) {
        const int head = kvh * group + r;
        const float* src =
            a.q + (static_cast<int64_t>(tile.first_token) * a.num_heads + head) * D + 16 * (lc / 2) + 2 * (lc % 2);
#pragma unroll
        for (int t = 0; t < 4; ++t) {
          const float2 x = *reinterpret_cast<const float2*>(src + 4 * t);
          words[t] = pack_f16x2(x.x * kQScale, x.y * kQScale);
        }
      }
      *reinterpret_cast<uint4*>(q_s + swizzled<D>(r, lc)) = make_uint4(words[0], words[1], words[2], words[3]);
    }
  }
  __syncthreads();

  const KeyTiles key_tiles = split_key_tiles(first, pos, a.splits, split);  // this split's K/V tiles
  const int kt_begin = key_tiles.begin, kt_end = key_tiles.end;

  const int32_t* pages = a.page_table + static_cast<int64_t>(tile.seq) * a.max_pages;
  const int64_t row_stride = static_cast<int64_t>(a.num_kv_heads) * D;
  const uint8_t* k_cache = static_cast<const uint8_t*>(a.k_cache) + static_cast<int64_t>(kvh) * D;
  const uint8_t* v_cache = static_cast<const uint8_t*>(a.v_cache) + static_cast<int64_t>(kvh) * D;
  const auto load_kv = [&](int kt, int buf) {
    for (int idx = threadIdx.x; idx < kKeys * kChunks; idx += blockDim.x) {
      const int r = idx / kChunks, c = idx % kChunks, j = kt * kKeys + r;
      const uint8_t *k_src = k_cache, *v_src = v_cache;
      int bytes = 0;
      if (j >= first && j <= pos) {
        const int64_t cache_row = cache_row_of(a, pages, j);
        if (cache_row >= 0) {
          const int64_t offset = cache_row * row_stride + c * 16;
          k_src += offset;
          v_src += offset;
          bytes = 16;
        } else if (c == 0) {
          set_error(a.error_flags, kErrAbsentPage);
        }
      }
      const int at = buf * kKeys * D + code_offset<D>(r, c);
      cp_async_16(k_raw + at, k_src, bytes);
      cp_async_16(v_raw + at, v_src, bytes);
    }
  };

  // Raw scores until the exponent (scale x k_scale / kQScale x log2 e in one FMA), as flash_attention.cu.
  const float scale_log2 = a.scale * a.k_scale * (kLog2e / kQScale);
  float o[D / 8][4];
#pragma unroll
  for (int n = 0; n < D / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  // Q's fragments stay in registers up to head_dim 128 (at 256 they would take 64 registers beside O's 128).
  constexpr bool kQInRegisters = kQRegs && D <= 128;
  uint32_t qf[kQInRegisters ? D / 16 : 1][4];
  const auto q_fragment = [&](int kk, uint32_t(&r)[4]) {
    ldmatrix_x4(r, q_s + swizzled<D>((lane & 7) + 8 * ((lane >> 3) & 1), 2 * kk + (lane >> 4)));
  };
  if constexpr (kQInRegisters) {
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) q_fragment(kk, qf[kk]);
  }

#pragma unroll
  for (int stage = 0; stage < kStages - 1; ++stage) {
    if (kt_begin + stage < kt_end) load_kv(kt_begin + stage, stage);
    cp_async_commit();  // empty groups keep the count uniform
  }
  for (int kt = kt_begin; kt < kt_end; ++kt) {
    const int step = kt - kt_begin, buf = step % kStages;
    cp_async_wait<kStages - 2>();
    __syncthreads();  // tile kt is in; every warp is done with the buffer the next load overwrites (step - 1's)
    if (kt + kStages - 1 < kt_end) load_kv(kt + kStages - 1, (step + kStages - 1) % kStages);
    cp_async_commit();

    // S = Q K^T for this warp's 16 keys: two 8-key n-tiles, one ldmatrix.x4 per 4 chunks (k steps) of a key row.
    const uint8_t* ks = k_raw + buf * kKeys * D;
    float s[2][4];
#pragma unroll
    for (int n = 0; n < 2; ++n) {
      s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
      const int key = key_base + 8 * n + (lane & 7);
#pragma unroll
      for (int c0 = 0; c0 < kChunks; c0 += 4) {
        uint32_t w[4];
        ldmatrix_x4(w, ks + code_offset<D>(key, c0 + (lane >> 3)));
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          uint32_t qa[4];
          if constexpr (kQInRegisters) {
#pragma unroll
            for (int e = 0; e < 4; ++e) qa[e] = qf[c0 + i][e];
          } else {
            q_fragment(c0 + i, qa);
          }
          mma_f16(s[n], qa, e4m3x2_to_f16x2(w[i]), e4m3x2_to_f16x2(w[i] >> 16));
        }
      }
    }
    // Mask only a tile the window edge or the position cuts.
    const int key0 = kt * kKeys;
    if (key0 < first || key0 + kKeys - 1 > pos) {
#pragma unroll
      for (int n = 0; n < 2; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int j = key0 + key_base + 8 * n + 2 * t4 + (e & 1);
          if (j < first || j > pos) s[n][e] = -INFINITY;
        }
    }
    // Online softmax per row (a quad holds the row's 16 scores of this warp); see flash_attention.cu.
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      float tile_max = fmaxf(fmaxf(s[0][2 * i], s[0][2 * i + 1]), fmaxf(s[1][2 * i], s[1][2 * i + 1]));
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
      if (tile_max == -INFINITY) {
        s[0][2 * i] = s[0][2 * i + 1] = s[1][2 * i] = s[1][2 * i + 1] = 0.0f;
        continue;
      }
      const float mx = fmaxf(m[i], tile_max);
      const float ref = mx * scale_log2;
      const float correction = fast_exp2(fmaf(m[i], scale_log2, -ref));
      m[i] = mx;
      l[i] *= correction;
#pragma unroll
      for (int n = 0; n < D / 8; ++n) o[n][2 * i] *= correction, o[n][2 * i + 1] *= correction;
#pragma unroll
      for (int n = 0; n < 2; ++n) {
        const float p0 = fast_exp2(fmaf(s[n][2 * i], scale_log2, -ref));
        const float p1 = fast_exp2(fmaf(s[n][2 * i + 1], scale_log2, -ref));
        l[i] += p0 + p1;
        s[n][2 * i] = p0;
        s[n][2 * i + 1] = p1;
      }
    }
    // O += P V: P's accumulators are the A operand (16 keys); one ldmatrix.x4.trans per two chunks of dims.
    const uint32_t pa[4] = {pack_f16x2(s[0][0], s[0][1]), pack_f16x2(s[0][2], s[0][3]), pack_f16x2(s[1][0], s[1][1]),
                            pack_f16x2(s[1][2], s[1][3])};
    const uint8_t* vs = v_raw + buf * kKeys * D;
    const int key_row = key_base + (lane & 7) + 8 * ((lane >> 3) & 1);
#pragma unroll
    for (int c = 0; c < kChunks; c += 2) {
      uint32_t w[4];  // [keys 2t, 2t+1 | keys 2t+8, 2t+9] x [chunk c | chunk c+1], codes of dims 2g, 2g+1 each
      ldmatrix_x4_trans(w, vs + code_offset<D>(key_row, c + (lane >> 4)));
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const uint32_t lo = w[2 * h], hi = w[2 * h + 1];
        mma_f16(o[2 * (c + h)], pa, e4m3x2_to_f16x2(__byte_perm(lo, 0, 0x20)),
                e4m3x2_to_f16x2(__byte_perm(hi, 0, 0x20)));  // dim 16 (c + h) + 2g
        mma_f16(o[2 * (c + h) + 1], pa, e4m3x2_to_f16x2(__byte_perm(lo, 0, 0x31)),
                e4m3x2_to_f16x2(__byte_perm(hi, 0, 0x31)));  // dim 16 (c + h) + 2g + 1
      }
    }
  }
  cp_async_wait_all();

  // Merge the warps' partial softmaxes of the same 16 rows: [warp][row] {m, l, pad, pad, o[D]} in the (now idle) code
  // tiles; a thread's four values of chunk c and row half i are dims 16c + 4t + 0..3 (even n-tile, odd, even, odd).
  float sum[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    sum[i] = l[i];
    sum[i] += __shfl_xor_sync(0xffffffffu, sum[i], 1);
    sum[i] += __shfl_xor_sync(0xffffffffu, sum[i], 2);
    m[i] = m[i] == -INFINITY ? -INFINITY : m[i] * scale_log2;  // exp2 domain from here on
  }
  __syncthreads();
  float* merge = reinterpret_cast<float*>(k_raw);
  constexpr int kStride = D + 4;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    float* mine = merge + (warp * 16 + g + 8 * i) * kStride;
    if (t4 == 0) mine[0] = m[i], mine[1] = sum[i];
#pragma unroll
    for (int c = 0; c < kChunks; ++c)
      *reinterpret_cast<float4*>(mine + 4 + 16 * c + 4 * t4) =
          make_float4(o[2 * c][2 * i], o[2 * c + 1][2 * i], o[2 * c][2 * i + 1], o[2 * c + 1][2 * i + 1]);
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < rows * D; idx += blockDim.x) {
    const int r = idx / D, d = idx % D;
    float top = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) top = fmaxf(top, merge[(w * 16 + r) * kStride]);
    float l_all = 0.0f, value = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float* theirs = merge + (w * 16 + r) * kStride;
      const float f = theirs[0] == -INFINITY ? 0.0f : fast_exp2(theirs[0] - top);
      l_all += theirs[1] * f;
      value += theirs[4 + d] * f;
    }
    const int head = kvh * group + r;
    const RowDestination dst = row_destination<D>(a, static_cast<int64_t>(tile.first_token) * a.num_heads + head, head,
                                                  split, top, l_all, d == 0);
    dst.values[d] = value * dst.factor;
  }
  // The split merge's scratch (rows x splits floats) goes past the warps' records.
  if (a.splits > 1) merge_splits_if_last<D>(a, tile, kvh, group, rows, merge + kWarps * 16 * kStride);
}

template <int D, bool kPrepare, int kStages, bool kQRegs, int kMinBlocks>
void launch_for(const AttentionArgs& a, cudaStream_t stream) {
  // The code tiles, or (when larger) the merge records and split scratch (16 rows x up to 64 splits) that reuse them.
  constexpr size_t kTiles = 2 * kStages * kKeys * D, kMerge = (kWarps * 16 * (D + 4) + 16 * 64) * sizeof(float);
  constexpr size_t smem = kRows * D * sizeof(uint16_t) + (kTiles > kMerge ? kTiles : kMerge);
  static const bool configured = [] {
    RS_CUDA_CHECK(cudaFuncSetAttribute(flash_decode_fp8_kernel<D, kPrepare, kStages, kQRegs, kMinBlocks>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    return true;
  }();
  (void)configured;
  const int tiles = flash_attention_tiles(a.num_tokens, a.num_seqs, a.num_heads, a.num_kv_heads, kRows);
  RS_CHECK(a.splits == 1 || (a.split_counters && int64_t{tiles} * a.num_kv_heads <= a.split_counter_words),
           "flash attention: {} tiles x {} KV heads exceed {} split counters", tiles, a.num_kv_heads,
           a.split_counter_words);
  launch_kernel(flash_decode_fp8_kernel<D, kPrepare, kStages, kQRegs, kMinBlocks>,
                dim3(tiles, a.num_kv_heads, a.splits), kWarps * 32, smem, stream, a);
}

}  // namespace

Fp8DecodeMode fp8_decode_mode() {
  static const Fp8DecodeMode mode = [] {
    const char* value = std::getenv("RS_FP8_DECODE");
    const std::string_view name = value ? value : "";
    return name == "registers" ? Fp8DecodeMode::kRegisters
           : name == "widen"   ? Fp8DecodeMode::kWiden
                               : Fp8DecodeMode::kLean;
  }();
  return mode;
}

void launch_flash_decode_fp8(const AttentionArgs& args, cudaStream_t stream) {
  RS_CHECK(args.num_tokens == args.num_seqs && args.num_heads / args.num_kv_heads <= kRows,
           "fp8 flash decode: one token per sequence and at most {} query heads per KV head", kRows);
  const bool prepare = args.prepare.qkv != nullptr;
  // lean (the default): Q re-read from shared memory each tile, so that 4 blocks (16 warps) fit an SM's registers where
  // Q in registers allows 3 (ncu: 0.69 eligible warps per scheduler at batch 256, latency-bound). H100, Qwen3-8B fp8
  // KV, 1,024-token contexts: batch 64 6,224 -> 6,893 tok/s, batch 256 13,385 -> 13,946 (docs/notes/fp8-kv.md).
  const bool lean = fp8_decode_mode() == Fp8DecodeMode::kLean;
  const auto run = [&]<int D>() {
    if (lean) {
      prepare ? launch_for<D, true, 3, false, D == 256 ? 2 : 4>(args, stream)
              : launch_for<D, false, 3, false, D == 256 ? 2 : 4>(args, stream);
    } else {
      prepare ? launch_for<D, true, 3, true, D == 256 ? 2 : 3>(args, stream)
              : launch_for<D, false, 3, true, D == 256 ? 2 : 3>(args, stream);
    }
  };
  switch (args.head_dim) {
    case 64: return run.template operator()<64>();
    case 128: return run.template operator()<128>();
    case 256: return run.template operator()<256>();
    default: RS_CHECK(false, "fp8 flash decode: head_dim {} (64, 128 or 256)", args.head_dim);
  }
}

}  // namespace rs::cuda
