// What the tensor-core attention kernels share (flash_attention.cu: bf16 and fp8 caches, every step shape;
// flash_decode_fp8.cu: decode steps over an fp8 cache): the tile a block owns, the destination of a row's result, the
// merge of key splits, and the decode step's own q/k preparation.
#pragma once

#include <cuda_runtime.h>

#include <climits>
#include <cmath>

#include "backend/cuda/kernels/device_utils.cuh"
#include "backend/cuda/kernels/kernels.cuh"
#include "backend/cuda/kernels/mma.cuh"
#include "backend/cuda/kernels/qkv_head.cuh"

namespace rs::cuda::flash {

constexpr int kKeys = 64;  // keys per K/V tile
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// The 64-key tiles [begin, end) that split `split` of `splits` reads for keys [key_lo, key_hi] (tiles aligned to
// multiples of 64). Kernels and the decode step's own K/V store (prepare_decode_token) must agree on it.
struct KeyTiles {
  int begin, end;
};
__device__ __forceinline__ KeyTiles split_key_tiles(int key_lo, int key_hi, int splits, int split) {
  const int tile0 = key_lo / kKeys, tiles = key_hi / kKeys - tile0 + 1;
  const int per_split = (tiles + splits - 1) / splits;
  return {tile0 + min(tiles, split * per_split), tile0 + min(tiles, (split + 1) * per_split)};
}

// The cache row holding key j of a sequence whose page table is `pages`, or -1 when its page is absent.
__device__ __forceinline__ int64_t cache_row_of(const AttentionArgs& a, const int32_t* pages, int j) {
  const int32_t page = pages[a.page_shift >= 0 ? j >> a.page_shift : j / a.page_size];
  if (page < 0) return -1;
  return a.page_shift >= 0 ? (static_cast<int64_t>(page) << a.page_shift) + (j & (a.page_size - 1))
                           : static_cast<int64_t>(page) * a.page_size + j % a.page_size;
}

// The tile of this block: which sequence, which of its tokens. Tiles are numbered sequence after sequence; every warp
// finds it (no shared memory, no barrier) with a scan over the sequences 32 at a time.
struct TileSlot {
  int seq = -1, first_token = 0, tokens = 0;
};
__device__ inline TileSlot find_tile(const int32_t* seq_token_start, int num_seqs, int tokens_per_tile) {
  const int lane = threadIdx.x % 32;
  // Last tiles first: a causal sequence's later tiles read the most keys, and starting them early shortens the tail.
  const int tile = static_cast<int>(gridDim.x - 1 - blockIdx.x);
  int before = 0;
  for (int base = 0; base < num_seqs; base += 32) {
    const int s = base + lane;
    const int start = s < num_seqs ? seq_token_start[s] : 0;
    const int len = s < num_seqs ? seq_token_start[s + 1] - start : 0;
    const int count = (len + tokens_per_tile - 1) / tokens_per_tile;
    int inclusive = count;
#pragma unroll
    for (int offset = 1; offset < 32; offset <<= 1) {
      const int y = __shfl_up_sync(0xffffffffu, inclusive, offset);
      if (lane >= offset) inclusive += y;
    }
    const int first_tile = before + inclusive - count;
    const unsigned hit = __ballot_sync(0xffffffffu, count > 0 && tile >= first_tile && tile < first_tile + count);
    if (hit) {
      const int src = __ffs(hit) - 1;
      TileSlot slot;
      slot.seq = base + src;
      const int index = tile - __shfl_sync(0xffffffffu, first_tile, src);
      const int seq_start = __shfl_sync(0xffffffffu, start, src), seq_len = __shfl_sync(0xffffffffu, len, src);
      slot.first_token = seq_start + index * tokens_per_tile;
      slot.tokens = min(tokens_per_tile, seq_len - index * tokens_per_tile);
      return slot;
    }
    before += __shfl_sync(0xffffffffu, inclusive, 31);
  }
  return TileSlot{};
}

// 2^x in one MUFU instruction (flushes subnormal results to zero; -inf gives 0).
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// Where row `row_index`'s results go: the output row (splits == 1) or its partial record, whose header [m in natural
// log units, l] is written when `header`. Returns the pointer for the D values and the factor they are scaled by
// (v_scale / softmax denominator with the sink, or v_scale for a partial; v_scale is 1 but for an fp8 cache). m is in
// the exp2 domain (scores x scale x log2 e).
struct RowDestination {
  float* values;
  float factor;
};
template <int D>
__device__ __forceinline__ RowDestination row_destination(const AttentionArgs& a, int64_t row_index, int head,
                                                          int split, float m, float l, bool header) {
  if (a.splits == 1) {
    float scale = 1.0f, denom = l;
    if (a.sinks) {  // the sink joins the softmax denominator only
      const float sink = load_elem(a.sinks, a.sinks_type, head) * kLog2e;
      const float top = fmaxf(m, sink);
      scale = fast_exp2(m - top);
      denom = l * scale + fast_exp2(sink - top);
    }
    return {a.out + row_index * D, a.v_scale * scale / denom};
  }
  float* part = a.partial + (row_index * a.splits + split) * (D + 2);
  if (header) {
    part[0] = m == -INFINITY ? -INFINITY : m * kLn2;
    part[1] = l;
  }
  return {part + 2, a.v_scale};  // partial sums already scaled: the merge is linear in them
}

// Called by every thread of a block after its partial rows are written: the last of the tile's `splits` blocks to
// arrive merges all splits of the tile's rows into the output (the combine kernel's arithmetic) and re-zeroes the
// counter. `scratch` holds rows x splits floats (the idle K/V tiles).
template <int D>
__device__ void merge_splits_if_last(const AttentionArgs& a, const TileSlot& tile, int kvh, int group, int rows,
                                     float* scratch) {
  __shared__ bool last;
  __threadfence();  // this thread's partial rows are visible device-wide before the block counts itself in
  __syncthreads();
  if (threadIdx.x == 0) {
    uint32_t* counter = a.split_counters + static_cast<int64_t>(blockIdx.x) * gridDim.y + kvh;
    last = atomicAdd(counter, 1u) == static_cast<uint32_t>(a.splits - 1);
    if (last) *counter = 0;  // no other block of this launch touches it again
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  const auto record = [&](int r) {
    const int token = tile.first_token + r / group, head = kvh * group + r % group;
    return a.partial + (static_cast<int64_t>(token) * a.num_heads + head) * a.splits * (D + 2);
  };
  // Per row: the weight of each split, exp(m_s - max) / denominator (the sink joins max and denominator).
  for (int r = warp; r < rows; r += warps) {
    const float* part = record(r);
    const int head = kvh * group + r % group;
    const float sink = a.sinks ? load_elem(a.sinks, a.sinks_type, head) : -INFINITY;
    float top = sink;
    for (int s = lane; s < a.splits; s += 32) top = fmaxf(top, __ldcg(part + s * (D + 2)));
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, offset));
    float denom = 0.0f;
    for (int s = lane; s < a.splits; s += 32) {
      const float ms = __ldcg(part + s * (D + 2));
      const float w = ms == -INFINITY ? 0.0f : expf(ms - top);
      scratch[r * a.splits + s] = w;
      denom += __ldcg(part + s * (D + 2) + 1) * w;
    }
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) denom += __shfl_xor_sync(0xffffffffu, denom, offset);
    if (a.sinks) denom += expf(sink - top);
    const float inv = 1.0f / denom;
    __syncwarp();
    for (int s = lane; s < a.splits; s += 32) scratch[r * a.splits + s] *= inv;
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < rows * D; idx += blockDim.x) {
    const int r = idx / D, d = idx % D;
    const float* part = record(r) + 2 + d;
    const float* w = scratch + r * a.splits;
    float value = 0.0f;
#pragma unroll 8
    for (int s = 0; s < a.splits; ++s) value += __ldcg(part + s * (D + 2)) * w[s];
    const int token = tile.first_token + r / group, head = kvh * group + r % group;
    a.out[(static_cast<int64_t>(token) * a.num_heads + head) * D + d] = value;
  }
}

// A decode step's own q and k (one token per tile): the token's q rows of KV head kvh come from the raw projection,
// normed and rotated by prepare_head and handed to store_q(row, dim, value), which writes them into the kernel's Q
// tile (rows past the group are zeroed: 2-byte elements, swizzled<D> rows), exactly the bits qkv_prepare + staging
// would give. The one split whose key range holds the token's own position also
// stores the token's k and v for this KV head (no other block reads that key); the kernel's barrier after this orders
// those stores before its cp.async reads of the tile.
template <int D, typename CacheT, typename StoreQ>
__device__ void prepare_decode_token(const AttentionArgs& a, int token, int kvh, int split, int group, int tile_rows,
                                     uint16_t* q_s, float* buf, StoreQ store_q) {
  const QkvPrepareArgs& p = a.prepare;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  const int32_t pos = a.positions[token];
  const bool pos_ok = pos >= 0 && pos < p.max_positions;
  const int64_t slot = p.slots[token];
  if (kvh == 0 && split == 0 && threadIdx.x == 0) {
    if (!pos_ok) set_error(a.error_flags, kErrPosition);
    if (slot >= p.cache_rows) set_error(a.error_flags, kErrKvSlot);
  }
  bool writer = false;  // the split arithmetic of the kernel for a tile of this one token
  if (slot >= 0 && slot < p.cache_rows && pos >= 0) {
    const KeyTiles mine = split_key_tiles(a.window > 0 ? max(0, pos - a.window + 1) : 0, pos, a.splits, split);
    writer = pos / kKeys >= mine.begin && pos / kKeys < mine.end;
  }
  const int total_heads = a.num_heads + 2 * a.num_kv_heads;
  const float* row = p.qkv + static_cast<int64_t>(token) * total_heads * D;
  const float* cos = p.cos_sin + static_cast<int64_t>(pos_ok ? pos : 0) * p.rotary_dim;
  const float* sin = cos + p.rotary_dim / 2;
  float* mine = buf + warp * D;
  const int items = group + (writer ? 2 : 0);  // q heads, then k and v
  for (int item = warp; item < items; item += warps) {
    if (item < group) {
      const float* in = row + static_cast<int64_t>(kvh * group + item) * D;
      prepare_head(in, D, p.q_norm, p.norm_type, p.eps, cos, sin, p.rotary_dim, pos_ok, mine,
                   [&](int i, float v) { store_q(item, i, v); });
    } else if (item == group) {
      CacheT* dst = static_cast<CacheT*>(p.k_cache) + (slot * a.num_kv_heads + kvh) * D;
      const float* in = row + static_cast<int64_t>(a.num_heads + kvh) * D;
      prepare_head(in, D, p.k_norm, p.norm_type, p.eps, cos, sin, p.rotary_dim, pos_ok, mine,
                   [&](int i, float v) { store_cache(dst + i, v, p.k_scale); });
    } else {
      CacheT* dst = static_cast<CacheT*>(p.v_cache) + (slot * a.num_kv_heads + kvh) * D;
      const float* in = row + static_cast<int64_t>(a.num_heads + a.num_kv_heads + kvh) * D;
      for (int i = lane; i < D; i += 32) store_cache(dst + i, in[i], p.v_scale);
    }
  }
  for (int idx = threadIdx.x; idx < (tile_rows - group) * (D / 8); idx += blockDim.x)
    *reinterpret_cast<uint4*>(q_s + swizzled<D>(group + idx / (D / 8), idx % (D / 8))) = make_uint4(0, 0, 0, 0);
}

}  // namespace rs::cuda::flash

namespace rs::cuda {
// How decode steps over an fp8 cache run, from RS_FP8_DECODE (read once; for A/B timings in one binary): lean
// (flash_decode_fp8.cu, the default: Q re-read from shared memory, 4 blocks per SM), `registers` (the same with Q's
// fragments in registers: 3 blocks per SM), or `widen` (flash_attention.cu's widening path, as prefill tiles).
enum class Fp8DecodeMode { kLean, kRegisters, kWiden };
Fp8DecodeMode fp8_decode_mode();
// Decode steps (one token per sequence, groups of at most 16 query heads per KV head) over an fp8 cache
// (flash_decode_fp8.cu); launch_flash_attention routes them here.
void launch_flash_decode_fp8(const AttentionArgs& args, cudaStream_t stream);
}  // namespace rs::cuda
