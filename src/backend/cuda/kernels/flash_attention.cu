// Paged causal attention on tensor cores (mma.sync m16n8k16, bf16 operands, f32 accumulation) for a bf16 or fp8 KV
// cache: prefill chunks, decode rows and mixed batches in one kernel, in the FlashAttention-2 scheme.
//
// A block owns one tile of query rows and one KV head. A tile packs the query heads of that KV head for consecutive
// tokens of one sequence (row = token * group + head in group), so the heads of a GQA group share every K/V load, and a
// decode token is one tile of `group` rows. Each of the 4 warps owns 16 rows (32 in 128-row prefill tiles: two m-tiles
// share every K/V fragment, FlashAttention-2's layout); K/V tiles of 64 keys are read straight from the paged cache
// through the page table (cp.async, double-buffered, or three stages for decode, XOR-swizzled shared memory read by
// ldmatrix) and the online softmax runs in f32 in the exp2 domain. Key tiles wholly outside every
// row's causal window are never loaded; only tiles that cross a row's window edge or its own position are masked. With
// several key splits (few blocks, long contexts) the rows go to `partial`, and the last split of a tile to finish
// (an arrival counter per tile) merges them and adds the sinks: no second kernel.
//
// Numerics match the CUDA-core kernel for a bf16 cache: q and the probabilities are rounded to bf16 before they
// multiply K and V; the softmax sums stay f32.
//
// An fp8 (e4m3) cache moves half the bytes: its tiles are copied raw (cp.async) into staging buffers, and each tile,
// once in, is widened into one bf16 K/V tile (e4m3 values are exact in bf16) that the mma reads as above. The
// per-tensor scales never touch the operands: k_scale multiplies the softmax scale and v_scale the output.
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "backend/cuda/cuda_check.cuh"
#include "backend/cuda/kernels/flash_attention_common.cuh"
#include "backend/cuda/kernels/launch.cuh"

namespace rs::cuda {
namespace {
using namespace flash;

// kSplitKeys (decode): one 16-row tile, and each warp takes its own 16 keys of every 64-key tile (a quarter of the
// mma work), the four partial softmaxes merged through shared memory at the end. Otherwise each warp owns kMTiles
// 16-row m-tiles and all 64 keys: with two, every K and V fragment a warp loads from shared memory feeds two mmas and
// the warp has two independent chains of work (FlashAttention-2's 32 rows per warp).
template <int D, int kWarps, bool kSplitKeys, bool kPrepare = false, int kMTiles = 1, bool kFp8 = false>
__global__ void __launch_bounds__(kWarps * 32, 8 / kWarps) flash_attention_kernel(AttentionArgs a) {
  static_assert(!kSplitKeys || kMTiles == 1, "decode tiles are one m-tile");
  static_assert(!kPrepare || kSplitKeys, "only decode tiles prepare their own q");
  pdl_enter();
  constexpr int kWarpRows = 16 * kMTiles;
  constexpr int kRows = kSplitKeys ? 16 : kWarpRows * kWarps;  // query rows per tile
  constexpr int kChunks = D / 8;                               // 16-byte chunks per row
  constexpr int kTiles = kSplitKeys ? 2 : kKeys / 8;           // 8-key n-tiles of S per warp
  // Decode has few blocks per SM and little math per tile: a third buffer keeps two tiles in flight per block.
  constexpr int kStages = kSplitKeys ? 3 : 2;
  // bf16: K/V tiles are read where they land. fp8: they land raw in staging buffers and are widened into one bf16 tile.
  constexpr int kBf16Stages = kFp8 ? 1 : kStages;
  extern __shared__ uint4 smem_raw[];
  uint16_t* q_s = reinterpret_cast<uint16_t*>(smem_raw);                       // [kRows][D]
  uint16_t* k_s = q_s + kRows * D;                                             // [kBf16Stages][kKeys][D]
  uint16_t* v_s = k_s + kBf16Stages * kKeys * D;                               // [kBf16Stages][kKeys][D]
  uint8_t* k_raw = reinterpret_cast<uint8_t*>(v_s + kBf16Stages * kKeys * D);  // fp8: [kStages][kKeys][D] codes
  uint8_t* v_raw = k_raw + (kFp8 ? kStages * kKeys * D : 0);
  __shared__ int range[4];  // min first key, max position, max first key, min position

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int group = a.num_heads / a.num_kv_heads;
  const int kvh = blockIdx.y, split = blockIdx.z;
  const TileSlot tile = find_tile(a.seq_token_start, a.num_seqs, kRows / group);
  if (tile.seq < 0) return;  // block-uniform: the grid is an upper bound on the tiles
  const int rows = tile.tokens * group;
  const int row0 = kSplitKeys ? 0 : warp * kWarpRows;  // this warp's first row
  const int key_base = kSplitKeys ? 16 * warp : 0;     // this warp's first key within a 64-key tile

  // Each thread's two rows of each m-tile (g and g + 8 of its 16), as the mma accumulator lays them out. Their key
  // ranges are read where a tile is masked: from registers for one m-tile, from shared memory for two (registers are
  // what limits that variant).
  const int g = lane / 4, t4 = lane % 4;
  constexpr bool kRangesInRegisters = kMTiles == 1;
  __shared__ int2 row_range[kRangesInRegisters ? 1 : kRows];  // {first key, position} per row
  int row_pos[kRangesInRegisters ? kMTiles : 1][2], row_first[kRangesInRegisters ? kMTiles : 1][2];
  const auto range_of = [&](int r) {
    const int pos = r < rows ? a.positions[tile.first_token + r / group] : -1;
    return make_int2(a.window > 0 ? max(0, pos - a.window + 1) : 0, pos);
  };
  if constexpr (kRangesInRegisters) {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int2 range = range_of(row0 + g + 8 * i);
      row_first[0][i] = range.x, row_pos[0][i] = range.y;
    }
  } else {
    for (int r = threadIdx.x; r < kRows; r += blockDim.x) row_range[r] = range_of(r);
  }
  if (threadIdx.x == 0) range[0] = INT_MAX, range[1] = -1, range[2] = 0, range[3] = INT_MAX;
  __syncthreads();
  if (threadIdx.x < tile.tokens) {
    const int pos = a.positions[tile.first_token + threadIdx.x];
    const int first = a.window > 0 ? max(0, pos - a.window + 1) : 0;
    atomicMin(&range[0], first);
    atomicMax(&range[1], pos);
    atomicMax(&range[2], first);
    atomicMin(&range[3], pos);
  }
  // Q rows -> bf16 shared tile (zeros past the last row).
  if constexpr (kPrepare) {
    __shared__ float prepare_buf[kWarps * D];
    prepare_decode_token<D, std::conditional_t<kFp8, uint8_t, uint16_t>>(
        a, tile.first_token, kvh, split, group, kRows, q_s, prepare_buf, [&](int r, int i, float v) {
          q_s[swizzled<D>(r, i / 8) + i % 8] = __bfloat16_as_ushort(__float2bfloat16_rn(v));
        });
  } else {
    for (int idx = threadIdx.x; idx < kRows * kChunks; idx += blockDim.x) {
      const int r = idx / kChunks, c = idx % kChunks;
      uint4 packed = make_uint4(0, 0, 0, 0);
      if (r < rows) {
        const int token = tile.first_token + r / group, head = kvh * group + r % group;
        const float4* src =
            reinterpret_cast<const float4*>(a.q + (static_cast<int64_t>(token) * a.num_heads + head) * D + c * 8);
        const float4 x = src[0], y = src[1];
        packed = make_uint4(pack_bf16x2(x.x, x.y), pack_bf16x2(x.z, x.w), pack_bf16x2(y.x, y.y), pack_bf16x2(y.z, y.w));
      }
      *reinterpret_cast<uint4*>(q_s + swizzled<D>(r, c)) = packed;
    }
  }
  __syncthreads();
  const int key_lo = range[0], key_hi = range[1], all_first = range[2], all_pos = range[3];

  const KeyTiles key_tiles = split_key_tiles(key_lo, key_hi, a.splits, split);  // this split's K/V tiles
  const int kt_begin = key_tiles.begin, kt_end = key_tiles.end;

  const int32_t* pages = a.page_table + static_cast<int64_t>(tile.seq) * a.max_pages;
  using CacheT = std::conditional_t<kFp8, uint8_t, uint16_t>;
  constexpr int kCacheChunks = D * sizeof(CacheT) / 16;  // 16-byte chunks per cache row
  const int64_t row_stride = static_cast<int64_t>(a.num_kv_heads) * D;
  const CacheT* k_cache = static_cast<const CacheT*>(a.k_cache) + static_cast<int64_t>(kvh) * D;
  const CacheT* v_cache = static_cast<const CacheT*>(a.v_cache) + static_cast<int64_t>(kvh) * D;
  const auto load_kv = [&](int kt, int buf) {
    for (int idx = threadIdx.x; idx < kKeys * kCacheChunks; idx += blockDim.x) {
      const int r = idx / kCacheChunks, c = idx % kCacheChunks, j = kt * kKeys + r;
      const CacheT *k_src = k_cache, *v_src = v_cache;
      int bytes = 0;
      if (j >= key_lo && j <= key_hi) {
        const int64_t cache_row = cache_row_of(a, pages, j);
        if (cache_row >= 0) {
          const int64_t offset = cache_row * row_stride + c * (16 / sizeof(CacheT));
          k_src += offset;
          v_src += offset;
          bytes = 16;
        } else if (c == 0) {
          set_error(a.error_flags, kErrAbsentPage);
        }
      }
      if constexpr (kFp8) {
        const int at = (buf * kKeys + r) * D + c * 16;
        cp_async_16(k_raw + at, k_src, bytes);
        cp_async_16(v_raw + at, v_src, bytes);
      } else {
        cp_async_16(k_s + buf * kKeys * D + swizzled<D>(r, c), k_src, bytes);
        cp_async_16(v_s + buf * kKeys * D + swizzled<D>(r, c), v_src, bytes);
      }
    }
  };
  // fp8: staging buffer `buf` -> the bf16 tiles, 16 codes (two bf16 chunks) per thread and step. Exact: every e4m3
  // value is a bf16 value (e4m3 -> f16 in hardware, then f16 -> f32 -> bf16 without rounding).
  const auto widen_kv = [&](int buf) {
    for (int idx = threadIdx.x; idx < 2 * kKeys * (D / 16); idx += blockDim.x) {
      const int side = idx / (kKeys * (D / 16)), rest = idx % (kKeys * (D / 16));
      const int r = rest / (D / 16), c = rest % (D / 16);
      const uint4 codes = *reinterpret_cast<const uint4*>((side ? v_raw : k_raw) + (buf * kKeys + r) * D + c * 16);
      uint16_t* dst = side ? v_s : k_s;
      const uint32_t words[4] = {codes.x, codes.y, codes.z, codes.w};
      uint32_t packed[8];
#pragma unroll
      for (int w = 0; w < 4; ++w) {
        float f[4];
        unpack_fp8x4(words[w], f);
        packed[2 * w] = pack_bf16x2(f[0], f[1]);
        packed[2 * w + 1] = pack_bf16x2(f[2], f[3]);
      }
      *reinterpret_cast<uint4*>(dst + swizzled<D>(r, 2 * c)) = make_uint4(packed[0], packed[1], packed[2], packed[3]);
      *reinterpret_cast<uint4*>(dst + swizzled<D>(r, 2 * c + 1)) =
          make_uint4(packed[4], packed[5], packed[6], packed[7]);
    }
  };

  // Scores stay raw (q.k) until the exponent, where one FMA applies scale x log2 e and subtracts the running max
  // (scale > 0, so the max of raw scores is the max of scaled ones). m is kept raw too.
  const float scale_log2 = a.scale * a.k_scale * kLog2e;  // k_scale is 1 but for an fp8 cache
  float o[kMTiles][D / 8][4];
  float m[kMTiles][2], l[kMTiles][2];
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
    for (int n = 0; n < D / 8; ++n) o[mt][n][0] = o[mt][n][1] = o[mt][n][2] = o[mt][n][3] = 0.0f;
    m[mt][0] = m[mt][1] = -INFINITY;
    l[mt][0] = l[mt][1] = 0.0f;
  }
  const bool warp_active = row0 < rows;  // warp-uniform: a short tile leaves the last warps loading only
  // Q's fragments stay in registers for one m-tile up to head_dim 128; at 256, or for two m-tiles, they would take 64
  // of the 255 registers beside O's 128, so they are re-read from shared memory once per K tile instead.
  constexpr bool kQInRegisters = D <= 128 && kMTiles == 1;
  uint32_t qf[kQInRegisters ? D / 16 : 1][4];
  if (kQInRegisters && warp_active) {
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk)
      ldmatrix_x4(qf[kk], q_s + swizzled<D>(row0 + (lane & 7) + 8 * ((lane >> 3) & 1), 2 * kk + (lane >> 4)));
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
    if constexpr (kFp8) {  // every warp finished reading the bf16 tiles at the barrier above
      widen_kv(buf);
      __syncthreads();
    }
    if (!warp_active) continue;
    const int tile_buf = kFp8 ? 0 : buf;

    // S = Q K^T for this warp's 16 rows and its keys of the tile.
    const uint16_t* ks = k_s + tile_buf * kKeys * D;
    float s[kMTiles][kTiles][4];
    if constexpr (kQInRegisters) {
#pragma unroll
      for (int n = 0; n < kTiles; ++n) {
        s[0][n][0] = s[0][n][1] = s[0][n][2] = s[0][n][3] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < D / 16; kk += 2) {
          uint32_t b[4];
          ldmatrix_x4(b, ks + swizzled<D>(key_base + 8 * n + (lane & 7), 2 * kk + (lane >> 3)));
          mma_bf16(s[0][n], qf[kk], b[0], b[1]);
          mma_bf16(s[0][n], qf[kk + 1], b[2], b[3]);
        }
      }
    } else {  // the same sums in the same order, with each Q fragment loaded once per tile
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
        for (int n = 0; n < kTiles; ++n) s[mt][n][0] = s[mt][n][1] = s[mt][n][2] = s[mt][n][3] = 0.0f;
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {  // one 16-wide k step at a time: fewer live fragments
        uint32_t qa[kMTiles][4];
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt) {
          const int q_row = row0 + 16 * mt + (lane & 7) + 8 * ((lane >> 3) & 1);
          ldmatrix_x4(qa[mt], q_s + swizzled<D>(q_row, 2 * kk + (lane >> 4)));
        }
#pragma unroll
        for (int n = 0; n < kTiles; ++n) {
          uint32_t b[2];
          ldmatrix_x2(b, ks + swizzled<D>(key_base + 8 * n + (lane & 7), 2 * kk + ((lane >> 3) & 1)));
#pragma unroll
          for (int mt = 0; mt < kMTiles; ++mt) mma_bf16(s[mt][n], qa[mt], b[0], b[1]);
        }
      }
    }
    // Mask only where a row's window edge or position cuts the tile (or keys fall outside the block's range).
    const int key0 = kt * kKeys;
    if (key0 < all_first || key0 + kKeys - 1 > all_pos) {
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
        for (int n = 0; n < kTiles; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int i = e / 2, j = key0 + key_base + 8 * n + 2 * t4 + (e & 1);
            int first, pos;
            if constexpr (kRangesInRegisters) {
              first = row_first[mt][i], pos = row_pos[mt][i];
            } else {
              const int2 range = row_range[row0 + 16 * mt + g + 8 * i];
              first = range.x, pos = range.y;
            }
            if (j < first || j > pos) s[mt][n][e] = -INFINITY;
          }
    }
    // Online softmax per row; the four threads of a quad hold the row's scores of this warp. A tile with none of the
    // row's keys (a neighbour row's diagonal, a window's edge) leaves the row's state untouched, so a row's result
    // depends only on its own keys, not on which rows share its tile.
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        float(&sm)[kTiles][4] = s[mt];
        float tile_max = -INFINITY;
#pragma unroll
        for (int n = 0; n < kTiles; ++n) tile_max = fmaxf(tile_max, fmaxf(sm[n][2 * i], sm[n][2 * i + 1]));
        tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
        tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
        if (tile_max == -INFINITY) {
#pragma unroll
          for (int n = 0; n < kTiles; ++n) sm[n][2 * i] = sm[n][2 * i + 1] = 0.0f;
          continue;
        }
        const float mx = fmaxf(m[mt][i], tile_max);
        const float ref = mx == -INFINITY ? 0.0f : mx * scale_log2;
        const float correction = fast_exp2(fmaf(m[mt][i], scale_log2, -ref));
        m[mt][i] = mx;
        l[mt][i] *= correction;
#pragma unroll
        for (int n = 0; n < D / 8; ++n) o[mt][n][2 * i] *= correction, o[mt][n][2 * i + 1] *= correction;
#pragma unroll
        for (int n = 0; n < kTiles; ++n) {
          const float p0 = fast_exp2(fmaf(sm[n][2 * i], scale_log2, -ref));
          const float p1 = fast_exp2(fmaf(sm[n][2 * i + 1], scale_log2, -ref));
          l[mt][i] += p0 + p1;
          sm[n][2 * i] = p0;
          sm[n][2 * i + 1] = p1;
        }
      }
    // O += P V: P's accumulator layout is the A operand of the next mma (two key n-tiles per 16-key step).
    const uint16_t* vs = v_s + tile_buf * kKeys * D;
#pragma unroll
    for (int kk = 0; kk < kTiles / 2; ++kk) {
      uint32_t pa[kMTiles][4];
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
        const float(&sm)[kTiles][4] = s[mt];
        pa[mt][0] = pack_bf16x2(sm[2 * kk][0], sm[2 * kk][1]);
        pa[mt][1] = pack_bf16x2(sm[2 * kk][2], sm[2 * kk][3]);
        pa[mt][2] = pack_bf16x2(sm[2 * kk + 1][0], sm[2 * kk + 1][1]);
        pa[mt][3] = pack_bf16x2(sm[2 * kk + 1][2], sm[2 * kk + 1][3]);
      }
      const int key_row = key_base + 16 * kk + (lane & 7) + 8 * ((lane >> 3) & 1);
#pragma unroll
      for (int n = 0; n < D / 8; n += 2) {
        uint32_t b[4];
        ldmatrix_x4_trans(b, vs + swizzled<D>(key_row, n + (lane >> 4)));
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt) {
          mma_bf16(o[mt][n], pa[mt], b[0], b[1]);
          mma_bf16(o[mt][n + 1], pa[mt], b[2], b[3]);
        }
      }
    }
  }
  cp_async_wait_all();

  float sum[kMTiles][2];
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      sum[mt][i] = l[mt][i];
      sum[mt][i] += __shfl_xor_sync(0xffffffffu, sum[mt][i], 1);
      sum[mt][i] += __shfl_xor_sync(0xffffffffu, sum[mt][i], 2);
      m[mt][i] = m[mt][i] == -INFINITY ? -INFINITY : m[mt][i] * scale_log2;  // exp2 domain from here on
    }
  if constexpr (kSplitKeys) {
    // Merge the warps' partial softmaxes of the same 16 rows: [warp][row] {m, l, o[D]} in the (now idle) K/V tiles.
    __syncthreads();
    float* merge = reinterpret_cast<float*>(k_s);
    constexpr int kStride = D + 2;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      float* mine = merge + (warp * 16 + g + 8 * i) * kStride;
      if (t4 == 0) mine[0] = m[0][i], mine[1] = sum[0][i];
#pragma unroll
      for (int n = 0; n < D / 8; ++n)
        *reinterpret_cast<float2*>(mine + 2 + 8 * n + 2 * t4) = make_float2(o[0][n][2 * i], o[0][n][2 * i + 1]);
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
        value += theirs[2 + d] * f;
      }
      const int token = tile.first_token + r / group, head = kvh * group + r % group;
      const RowDestination dst =
          row_destination<D>(a, static_cast<int64_t>(token) * a.num_heads + head, head, split, top, l_all, d == 0);
      dst.values[d] = value * dst.factor;
    }
    // The merge scratch (rows x splits floats) goes past the warps' records in the idle K/V tiles.
    if (a.splits > 1) merge_splits_if_last<D>(a, tile, kvh, group, rows, merge + kWarps * 16 * kStride);
    return;
  }
  if (warp_active) {
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const int r = row0 + 16 * mt + g + 8 * i;
        if (r >= rows) continue;
        const int token = tile.first_token + r / group, head = kvh * group + r % group;
        const RowDestination dst = row_destination<D>(a, static_cast<int64_t>(token) * a.num_heads + head, head, split,
                                                      m[mt][i], sum[mt][i], t4 == 0);
#pragma unroll
        for (int n = 0; n < D / 8; ++n)
          *reinterpret_cast<float2*>(dst.values + 8 * n + 2 * t4) =
              make_float2(o[mt][n][2 * i] * dst.factor, o[mt][n][2 * i + 1] * dst.factor);
      }
  }
  // K/V tiles are idle (every cp.async waited for above, every warp past its last tile at the barrier inside).
  if (a.splits > 1) merge_splits_if_last<D>(a, tile, kvh, group, rows, reinterpret_cast<float*>(k_s));
}

template <int D, int kWarps, bool kSplitKeys, bool kPrepare = false, int kMTiles = 1, bool kFp8 = false>
void launch_for(const AttentionArgs& a, cudaStream_t stream) {
  constexpr int kRows = kSplitKeys ? 16 : 16 * kMTiles * kWarps;
  constexpr int kStages = kSplitKeys ? 3 : 2;
  // fp8: one bf16 K/V tile pair plus kStages raw tile pairs of one byte per value.
  const size_t smem = kFp8 ? (kRows + 2 * kKeys) * D * sizeof(uint16_t) + 2 * kStages * kKeys * D
                           : (kRows + 2 * kStages * kKeys) * D * sizeof(uint16_t);
  static const bool configured = [&] {
    RS_CUDA_CHECK(cudaFuncSetAttribute(flash_attention_kernel<D, kWarps, kSplitKeys, kPrepare, kMTiles, kFp8>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    return true;
  }();
  (void)configured;
  const int tiles = flash_attention_tiles(a.num_tokens, a.num_seqs, a.num_heads, a.num_kv_heads, kRows);
  RS_CHECK(a.splits == 1 || (a.split_counters && int64_t{tiles} * a.num_kv_heads <= a.split_counter_words),
           "flash attention: {} tiles x {} KV heads exceed {} split counters", tiles, a.num_kv_heads,
           a.split_counter_words);
  launch_kernel(flash_attention_kernel<D, kWarps, kSplitKeys, kPrepare, kMTiles, kFp8>,
                dim3(tiles, a.num_kv_heads, a.splits), kWarps * 32, smem, stream, a);
}

}  // namespace

bool flash_attention_supported(int32_t num_heads, int32_t num_kv_heads, int32_t head_dim, KvType cache_type) {
  return cache_type != KvType::kF32 && (head_dim == 64 || head_dim == 128 || head_dim == 256) && num_kv_heads > 0 &&
         num_heads % num_kv_heads == 0 && num_heads / num_kv_heads <= 64;
}

int32_t flash_attention_rows(int32_t num_tokens, int32_t num_seqs, int32_t num_heads, int32_t num_kv_heads,
                             int32_t head_dim) {
  // Decode: one token per tile; groups of up to 16 heads split the keys over the 4 warps (16-row tiles), larger
  // groups take 64-row tiles. Prefill tiles of 128 rows halve the K/V reads per row where the registers allow
  // (head_dim 128: 4 warps of two 16-row m-tiles at 255 registers, two blocks per SM out of step; head_dim 256 keeps
  // 64-row tiles: its K/V stages alone take 128 KiB of shared memory).
  if (num_tokens == num_seqs) return num_heads / num_kv_heads <= 16 ? 16 : 64;
  return head_dim == 128 ? 128 : 64;
}

int32_t flash_attention_tiles(int32_t num_tokens, int32_t num_seqs, int32_t num_heads, int32_t num_kv_heads,
                              int32_t rows) {
  const int32_t tokens_per_tile = rows / (num_heads / num_kv_heads);
  return (num_tokens + tokens_per_tile - 1) / tokens_per_tile + num_seqs;  // each sequence adds at most one part tile
}

int64_t flash_attention_partial_floats(int32_t num_tokens, int32_t num_seqs, int32_t num_heads, int32_t num_kv_heads,
                                       int32_t head_dim, int32_t max_kv_len, int32_t window, int32_t num_sms,
                                       int32_t* splits) {
  // Tiles actually present: a sequence's tokens fill ceil(tokens / tokens_per_tile) tiles.
  const int32_t tokens_per_tile =
      flash_attention_rows(num_tokens, num_seqs, num_heads, num_kv_heads, head_dim) / (num_heads / num_kv_heads);
  const int64_t blocks =
      static_cast<int64_t>(std::max<int64_t>(num_seqs, ceil_div(num_tokens, tokens_per_tile))) * num_kv_heads;
  const int64_t range = window > 0 ? std::min(window, max_kv_len) : max_kv_len;
  // Splits fill one wave of blocks (two per SM: the decode tile's three K/V stages take ~100 KiB of shared memory)
  // and never start a second, partial one: measured on the H200 (Qwen3-8B, 4k context), batch 8 with 4 splits (256
  // blocks) steps in 7.15 ms against 8.06 with 5 (320 blocks, 1.2 waves), batch 32 with 1 split in 11.68 ms against
  // 12.11 with 2 (docs/notes/cuda-decode.md).
  const int64_t target = 2 * static_cast<int64_t>(num_sms);
  int64_t count = 1;
  if (blocks < target && range > 2 * kKeys)
    count = std::min({ceil_div(range, int64_t{2} * kKeys), target / blocks, int64_t{64}});
  *splits = static_cast<int32_t>(std::max<int64_t>(count, 1));
  if (*splits == 1) return 0;
  // Splits happen only below `target` blocks of at most 128 rows, and at most target / blocks + 1 of them: tokens x
  // heads x splits < 2 x target x 128 rows. Reserving that bound (not this batch's need) keeps the buffer from ever
  // moving, so a prefill that splits differently does not invalidate recorded decode graphs.
  const int64_t need = static_cast<int64_t>(num_tokens) * num_heads * *splits * (head_dim + 2);
  return std::max(need, 2 * target * 128 * (head_dim + 2));
}

namespace {
template <bool kFp8>
void launch_flash_attention_for(const AttentionArgs& args, int32_t rows, cudaStream_t stream) {
  if (args.prepare.qkv) {
    if (args.head_dim == 64) return launch_for<64, 4, true, true, 1, kFp8>(args, stream);
    if (args.head_dim == 256) return launch_for<256, 4, true, true, 1, kFp8>(args, stream);
    return launch_for<128, 4, true, true, 1, kFp8>(args, stream);
  }
  if (args.head_dim == 64) {
    rows == 16 ? launch_for<64, 4, true, false, 1, kFp8>(args, stream)
               : launch_for<64, 4, false, false, 1, kFp8>(args, stream);
  } else if (args.head_dim == 256) {  // Qwen3-Next / Qwen3.5 full-attention layers
    rows == 16 ? launch_for<256, 4, true, false, 1, kFp8>(args, stream)
               : launch_for<256, 4, false, false, 1, kFp8>(args, stream);
  } else {
    // 128-row prefill tiles: 4 warps of two m-tiles each. Measured on the H200 against 8 warps of one (Qwen3-8B dummy,
    // `bench --prompt-tokens N`, same call): 16k 19,340 -> 20,921 tok/s, 32k 12,899 -> 14,452, identical sums.
    rows == 16    ? launch_for<128, 4, true, false, 1, kFp8>(args, stream)
    : rows == 128 ? launch_for<128, 4, false, false, 2, kFp8>(args, stream)
                  : launch_for<128, 4, false, false, 1, kFp8>(args, stream);
  }
}
}  // namespace

void launch_flash_attention(const AttentionArgs& args, cudaStream_t stream) {
  if (args.num_tokens == 0) return;
  // Batch-invariant: 64-row tiles of 4 warps for every step (a decode row then sums exactly as a prefill row).
  const int32_t rows = args.batch_invariant ? 64
                                            : flash_attention_rows(args.num_tokens, args.num_seqs, args.num_heads,
                                                                   args.num_kv_heads, args.head_dim);
  RS_CHECK(args.cache_type != KvType::kF32, "flash attention reads a bf16 or fp8 cache");
  if (args.prepare.qkv)
    RS_CHECK(rows == 16 && args.num_tokens == args.num_seqs && args.prepare.cache_type == args.cache_type,
             "flash attention: only decode steps of groups up to 16 prepare their own q ({} tokens, {} sequences)",
             args.num_tokens, args.num_seqs);
  if (args.cache_type == KvType::kFp8) {
    // Decode tiles read the fp8 codes straight into their mma fragments (flash_decode_fp8.cu) unless
    // RS_FP8_DECODE=widen keeps them on this kernel's widening path.
    if (rows == 16 && fp8_decode_mode() != Fp8DecodeMode::kWiden) return launch_flash_decode_fp8(args, stream);
    return launch_flash_attention_for<true>(args, rows, stream);
  }
  launch_flash_attention_for<false>(args, rows, stream);
}

}  // namespace rs::cuda
