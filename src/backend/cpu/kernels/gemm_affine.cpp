#include "backend/cpu/kernels/gemm_affine.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "backend/cpu/kernels/gemm_bf16.h"
#include "backend/cpu/kernels/simd.h"
#include "base/error.h"
#include "tensor/dtype.h"

namespace rs::cpu {
namespace {

int64_t chunk_inputs(int bits) { return bits == 4 ? 64 : 32; }  // inputs per 32 bytes of codes
constexpr int64_t kPrefetchBytes = 8192;        // how far ahead of the GEMV's reads its codes are prefetched
constexpr int64_t kDecodePrefetchBytes = 4096;  // and of each row's reads in the GEMM's panel decode

}  // namespace

bool affine_kernel_supports(const LinearWeight& w) {
  if (!has_bf16_gemm() || w.format != LinearWeight::Format::kAffine || (w.bits != 4 && w.bits != 8)) return false;
  const int64_t chunk = chunk_inputs(w.bits), group = w.scale_block_cols;
  if (w.in_features <= 0 || w.in_features % chunk != 0 || group <= 0 || w.in_features % group != 0) return false;
  // The GEMV's chunks and the GEMM's 32-input steps each hold whole groups or lie inside one.
  const auto tiles = [group](int64_t span) { return group % span == 0 || span % group == 0; };
  return group >= 16 && tiles(chunk) && tiles(32);
}

#if defined(__AVX512BF16__)

namespace {

// Activations of one call to the GEMV: bf16, in the order the chunks' code values come out (4-bit: a chunk's 32 even
// inputs, then its 32 odd ones; 8-bit: as given), and each group's f32 sum of those bf16 values at the odd positions of
// a [groups][2] array (the even ones zero), so that one fma against a row's (scale, bias) pairs adds bias x sum.
// (Two bf16 terms per activation, hi + lo, made the GEMV near-exact but 20-30% slower on 4-bit weights, where it is
// no longer bound by memory on 2 Zen 5 cores; bf16 activations are the fast path's numerics, as in its GEMMs.)
struct GemvActivations {
  int64_t in = 0, groups = 0;
  std::vector<uint16_t> x;  // [tokens][in]
  std::vector<float> sums;  // [tokens][groups * 2 rounded up to 16]
  int64_t sums_stride = 0;
  // Compact scales (CompactScales). Symmetric: the scales, and -zero x each group's sum, [tokens][groups rounded up to
  // 16]; two-level: the levels and super-scales (their biases use `sums`).
  const float* scales = nullptr;
  const uint8_t* levels = nullptr;
  const float* supers = nullptr;
  std::vector<float> offset_sums;
  int64_t offset_stride = 0;
};

void prepare_gemv(const float* x, int64_t tokens, const LinearWeight& w, const CompactScales* compact,
                  GemvActivations& a) {
  const CompactScales* symmetric = compact && compact->scales ? compact : nullptr;
  const int64_t in = w.in_features, group = w.scale_block_cols;
  a.in = in;
  a.groups = in / group;
  a.sums_stride = (a.groups * 2 + 15) / 16 * 16;
  a.x.resize(tokens * in);
  a.sums.assign(tokens * a.sums_stride, 0.0f);
  a.scales = symmetric ? symmetric->scales : nullptr;
  a.levels = compact && compact->levels ? compact->levels : nullptr;
  a.supers = a.levels ? compact->supers : nullptr;
  a.offset_stride = (a.groups + 15) / 16 * 16;
  if (symmetric) a.offset_sums.assign(tokens * a.offset_stride, 0.0f);
  for (int64_t t = 0; t < tokens; ++t) {
    const float* xt = x + t * in;
    uint16_t* dst = a.x.data() + t * in;
    if (w.bits == 4) {
      for (int64_t c = 0; c < in; c += 64)
        for (int64_t k = 0; k < 32; ++k) {
          dst[c + k] = f32_to_bf16(xt[c + 2 * k]);
          dst[c + 32 + k] = f32_to_bf16(xt[c + 2 * k + 1]);
        }
    } else {
      for (int64_t i = 0; i < in; ++i) dst[i] = f32_to_bf16(xt[i]);
    }
    float* sums = a.sums.data() + t * a.sums_stride;
    for (int64_t g = 0; g < a.groups; ++g) {
      // The sum of the very values the products use: GGUF's symmetric types store w = d * (q' - 128) as bias -128 d,
      // and only the same rounded sum cancels the offset (an exact one would leave 128 d times the rounding).
      float sum = 0.0f;
      for (int64_t i = g * group; i < (g + 1) * group; ++i) sum += bf16_to_f32(f32_to_bf16(xt[i]));
      sums[2 * g + 1] = sum;
      // -zero is a power of two: -zero x sum is exact, so scale x it equals the stored bias x sum.
      if (symmetric) a.offset_sums[t * a.offset_stride + g] = -symmetric->zero * sum;
    }
  }
}

// Word i: bf16 of (i & 15), and of 16 * (i & 15). vpermw reads only an index's low 5 bits, so a byte's high nibble
// needs no mask.
__m512i code_table(int multiplier) {
  alignas(64) uint16_t table[32];
  for (int i = 0; i < 32; ++i) table[i] = f32_to_bf16(static_cast<float>(multiplier * (i & 15)));
  return _mm512_load_si512(table);
}

// Per lane of a chunk's 16 partial sums, the float offset of its group's scale within the chunk's (scale, bias) pairs:
// lane j covers inputs [j * span / 16, (j + 1) * span / 16) of a span of `span` inputs.
__m512i lane_scale_index(int64_t span, int64_t group, int stride = 2) {
  alignas(64) int32_t index[16];
  for (int j = 0; j < 16; ++j) index[j] = static_cast<int32_t>(stride * ((j * span / 16) / group));
  return _mm512_load_si512(index);
}

// kRows rows x tokens [t0, t0 + kTokens) of the GEMV. Each chunk's codes are decoded once for those tokens.
struct GemvTables {
  __m512i low, high;    // code_table(1), and code_table(16) for 8-bit codes
  __m512i scale_index;  // lane_scale_index(chunk, group[, 1 for scales alone]): groups smaller than chunks
};

// Not inlined into its row loop: GCC 12 then keeps the 8-bit tile's accumulators in registers (20% faster).
// How a tile reads its scales and biases: the pairs, or a compact form (CompactScales).
enum ScaleForm : int { kPairs, kSymmetric, kTwoLevel };

// Not inlined into its row loop (above).
template <int kBits, int kRows, int kTokens, int kForm>
__attribute__((noinline)) void gemv_tile(const GemvActivations& a, const LinearWeight& w, const GemvTables& tables,
                                         int64_t row, int64_t t0, float* out, int64_t out_stride) {
  constexpr int64_t kChunk = kBits == 4 ? 64 : 32;
  constexpr int kStride = kForm == kSymmetric ? 1 : 2;  // floats (two-level: bytes) per group
  const int64_t in = a.in, group = w.scale_block_cols, groups = a.groups, row_bytes = in * kBits / 8;
  const __m512i low_table = tables.low, high_table = tables.high;
  const uint8_t* codes[kRows];
  const float* pairs[kRows];
  const uint8_t* levels[kRows];  // two-level
  const float* supers[kRows];
  const int64_t per_super = 256 / group, supers_per_row = in / 256;
  for (int r = 0; r < kRows; ++r) {
    codes[r] = w.weight.data_as<uint8_t>() + (row + r) * row_bytes;
    pairs[r] = (kForm == kSymmetric ? a.scales : w.scales.data_as<float>()) + (row + r) * groups * kStride;
    levels[r] = kForm == kTwoLevel ? a.levels + (row + r) * groups * 2 : nullptr;
    supers[r] = kForm == kTwoLevel ? a.supers + (row + r) * supers_per_row * 2 : nullptr;
  }
  // The scale of group g of tile row r.
  const auto scale_of = [&](int r, int64_t g) {
    if constexpr (kForm == kTwoLevel)
      return supers[r][2 * (g / per_super)] * static_cast<float>(levels[r][2 * g]);
    else
      return pairs[r][kStride * g];
  };
  __m512 acc[kRows][kTokens];
  for (int r = 0; r < kRows; ++r)
    for (int t = 0; t < kTokens; ++t) acc[r][t] = _mm512_setzero_ps();
  // One chunk's 16 partial sums per (row, token), added onto `part`.
  const auto chunk = [&](int64_t c, __m512(&part)[kRows][kTokens]) {
    for (int r = 0; r < kRows; ++r) {
      // The rows a thread reads are one contiguous stream of codes (and one of pairs); the hardware prefetcher alone
      // leaves the GEMV waiting on memory.
      // (Addresses as integers: they may lie past the arrays, harmless for a prefetch but not as C++ pointers.)
      _mm_prefetch(reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(codes[r]) + c * 32 + kPrefetchBytes),
                   _MM_HINT_T0);
      const uintptr_t scale_stream = kForm == kTwoLevel
                                         ? reinterpret_cast<uintptr_t>(levels[r] + c * 2 * kChunk / group)
                                         : reinterpret_cast<uintptr_t>(pairs[r] + c * kStride * kChunk / group);
      _mm_prefetch(reinterpret_cast<const char*>(scale_stream + kPrefetchBytes), _MM_HINT_T0);
      const __m512i words =
          _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes[r] + c * 32)));
      const __m512bh low = (__m512bh)_mm512_permutexvar_epi16(words, low_table);
      const __m512bh high = (__m512bh)_mm512_permutexvar_epi16(_mm512_srli_epi16(words, 4), high_table);
      for (int t = 0; t < kTokens; ++t) {
        const uint16_t* xt = a.x.data() + (t0 + t) * in + c * kChunk;
        // 4-bit: the low nibbles are the chunk's even inputs, the high ones its odd inputs (x is stored that way);
        // 8-bit: both halves of a code multiply the same input.
        const __m512bh x_low = (__m512bh)_mm512_loadu_si512(xt);
        const __m512bh x_high = kBits == 4 ? (__m512bh)_mm512_loadu_si512(xt + 32) : x_low;
        part[r][t] = _mm512_dpbf16_ps(_mm512_dpbf16_ps(part[r][t], low, x_low), high, x_high);
      }
    }
  };
  if (group >= kChunk) {
    // Whole chunks per group: sum them, then scale once.
    const int64_t per_group = group / kChunk;
    for (int64_t g = 0; g < groups; ++g) {
      __m512 part[kRows][kTokens];
      for (int r = 0; r < kRows; ++r)
        for (int t = 0; t < kTokens; ++t) part[r][t] = _mm512_setzero_ps();
      for (int64_t c = g * per_group; c < (g + 1) * per_group; ++c) chunk(c, part);
      for (int r = 0; r < kRows; ++r) {
        const __m512 scale = _mm512_set1_ps(scale_of(r, g));
        for (int t = 0; t < kTokens; ++t) acc[r][t] = _mm512_fmadd_ps(part[r][t], scale, acc[r][t]);
      }
    }
  } else {
    // Several groups per chunk: lane j's scale picked from the chunk's pairs.
    const int64_t per_chunk = kChunk / group;
    const __m512i index = tables.scale_index;
    const __mmask16 mask = static_cast<__mmask16>((1u << (kStride * per_chunk)) - 1);
    __m512 super_pairs[kRows];  // two-level: the current superblock's pairs
    for (int64_t c = 0; c < in / kChunk; ++c) {
      __m512 part[kRows][kTokens];
      for (int r = 0; r < kRows; ++r)
        for (int t = 0; t < kTokens; ++t) part[r][t] = _mm512_setzero_ps();
      chunk(c, part);
      for (int r = 0; r < kRows; ++r) {
        __m512 scales;
        if constexpr (kForm == kTwoLevel) {
          // A superblock's eight (scale, bias) pairs made in one register from its 16 level bytes times (super-scale,
          // bias factor), at its first chunk; each chunk then picks its pairs as from the pairs layout.
          constexpr int64_t kChunksPerSuper = 256 / kChunk;
          if (c % kChunksPerSuper == 0) {
            const int64_t sb = c / kChunksPerSuper;
            const __m512 lv = _mm512_cvtepi32_ps(
                _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(levels[r] + 16 * sb))));
            double factors;  // (super-scale, bias factor) as one 64-bit lane, broadcast
            std::memcpy(&factors, supers[r] + 2 * sb, sizeof factors);
            super_pairs[r] = _mm512_mul_ps(lv, _mm512_castpd_ps(_mm512_set1_pd(factors)));
          }
          const __m512i at = _mm512_add_epi32(index, _mm512_set1_epi32(static_cast<int>(4 * (c % kChunksPerSuper))));
          scales = _mm512_permutexvar_ps(at, super_pairs[r]);
        } else {
          scales = _mm512_permutexvar_ps(index, _mm512_maskz_loadu_ps(mask, pairs[r] + kStride * c * per_chunk));
        }
        for (int t = 0; t < kTokens; ++t) acc[r][t] = _mm512_fmadd_ps(part[r][t], scales, acc[r][t]);
      }
    }
  }
  // Biases: sum over groups of bias x the group's activation sum, eight (scale, bias) pairs per fma (symmetric: sixteen
  // scales against -zero x the sums; two-level: eight (level, level) byte pairs times the superblock's bias scale).
  if constexpr (kForm == kTwoLevel) {
    for (int64_t g = 0; g < groups; g += 8) {  // eight groups lie in one superblock (groups of 32)
      for (int r = 0; r < kRows; ++r) {
        const __m512 lv = _mm512_cvtepi32_ps(
            _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(levels[r] + 2 * g))));
        const __m512 p = _mm512_mul_ps(lv, _mm512_set1_ps(supers[r][2 * (g / per_super) + 1]));
        for (int t = 0; t < kTokens; ++t)
          acc[r][t] = _mm512_fmadd_ps(p, _mm512_loadu_ps(a.sums.data() + (t0 + t) * a.sums_stride + 2 * g), acc[r][t]);
      }
    }
    for (int r = 0; r < kRows; ++r)
      for (int t = 0; t < kTokens; ++t) out[(t0 + t) * out_stride + row + r] = _mm512_reduce_add_ps(acc[r][t]);
    return;
  }
  const float* sums = kForm == kSymmetric ? a.offset_sums.data() : a.sums.data();
  const int64_t sums_stride = kForm == kSymmetric ? a.offset_stride : a.sums_stride;
  for (int64_t f = 0; f < groups * kStride; f += 16) {
    const int64_t left = groups * kStride - f;
    const __mmask16 mask = left >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << left) - 1);
    for (int r = 0; r < kRows; ++r) {
      const __m512 p = _mm512_maskz_loadu_ps(mask, pairs[r] + f);
      for (int t = 0; t < kTokens; ++t)
        acc[r][t] = _mm512_fmadd_ps(p, _mm512_loadu_ps(sums + (t0 + t) * sums_stride + f), acc[r][t]);
    }
  }
  for (int r = 0; r < kRows; ++r)
    for (int t = 0; t < kTokens; ++t) out[(t0 + t) * out_stride + row + r] = _mm512_reduce_add_ps(acc[r][t]);
}

template <int kBits, int kRows, int kForm>
void gemv_token_blocks(const GemvActivations& a, int64_t tokens, const LinearWeight& w, const GemvTables& tables,
                       int64_t row, float* out, int64_t out_stride) {
  // Blocks of up to 4 tokens (the accumulators fill the registers); a tile's rows stay in L1 between blocks, so the
  // codes stream from memory once per step.
  for (int64_t t0 = 0; t0 < tokens; t0 += 4) {
    switch (std::min<int64_t>(4, tokens - t0)) {
      case 4: gemv_tile<kBits, kRows, 4, kForm>(a, w, tables, row, t0, out, out_stride); break;
      case 3: gemv_tile<kBits, kRows, 3, kForm>(a, w, tables, row, t0, out, out_stride); break;
      case 2: gemv_tile<kBits, kRows, 2, kForm>(a, w, tables, row, t0, out, out_stride); break;
      default: gemv_tile<kBits, kRows, 1, kForm>(a, w, tables, row, t0, out, out_stride); break;
    }
  }
}

template <int kBits>
void gemv_rows(const GemvActivations& a, int64_t tokens, const LinearWeight& w, float* out, int64_t out_stride,
               int64_t row_begin, int64_t row_end) {
  constexpr int64_t kChunk = kBits == 4 ? 64 : 32;
  const int form = a.levels ? kTwoLevel : a.scales ? kSymmetric : kPairs;
  const GemvTables tables{code_table(1), code_table(kBits == 4 ? 1 : 16),
                          lane_scale_index(kChunk, w.scale_block_cols, form == kSymmetric ? 1 : 2)};
  const auto run = [&]<int kForm>() {
    int64_t r = row_begin;
    for (; r + 2 <= row_end; r += 2) gemv_token_blocks<kBits, 2, kForm>(a, tokens, w, tables, r, out, out_stride);
    for (; r < row_end; ++r) gemv_token_blocks<kBits, 1, kForm>(a, tokens, w, tables, r, out, out_stride);
  };
  if (form == kTwoLevel)
    run.template operator()<kTwoLevel>();
  else if (form == kSymmetric)
    run.template operator()<kSymmetric>();
  else
    run.template operator()<kPairs>();
}

void run_gemv(const GemvActivations& a, int64_t tokens, const LinearWeight& w, float* out, int64_t out_stride,
              int64_t row_begin, int64_t row_end) {
  RS_CHECK(tokens >= 1 && tokens <= kAffineGemvTokens, "affine GEMV of {} tokens", tokens);
  if (w.bits == 4)
    gemv_rows<4>(a, tokens, w, out, out_stride, row_begin, row_end);
  else
    gemv_rows<8>(a, tokens, w, out, out_stride, row_begin, row_end);
}

// ---- GEMM: panels decoded into the bf16 VNNI layout ----

// 16 x 16 dwords transposed in registers: rows[i] lane j -> rows[j] lane i.
void transpose16(__m512i (&rows)[16]) {
  __m512i t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(rows[i], rows[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(rows[i], rows[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    rows[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
    rows[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    rows[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
    rows[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  // rows[4b + k] now holds, in each 128-bit lane l, element (4l + k) of rows 4b..4b+3.
  for (int i = 0; i < 4; ++i) {
    t[i] = _mm512_shuffle_i32x4(rows[i], rows[4 + i], 0x88);      // lanes 0, 2 of each
    t[4 + i] = _mm512_shuffle_i32x4(rows[i], rows[4 + i], 0xDD);  // lanes 1, 3
    t[8 + i] = _mm512_shuffle_i32x4(rows[8 + i], rows[12 + i], 0x88);
    t[12 + i] = _mm512_shuffle_i32x4(rows[8 + i], rows[12 + i], 0xDD);
  }
  for (int i = 0; i < 4; ++i) {
    rows[i] = _mm512_shuffle_i32x4(t[i], t[8 + i], 0x88);
    rows[8 + i] = _mm512_shuffle_i32x4(t[i], t[8 + i], 0xDD);
    rows[4 + i] = _mm512_shuffle_i32x4(t[4 + i], t[12 + i], 0x88);
    rows[12 + i] = _mm512_shuffle_i32x4(t[4 + i], t[12 + i], 0xDD);
  }
}

// Inputs [i0, i0 + 32) of one row as 16 dwords of bf16 pairs (inputs 2k, 2k + 1): bf16(scale * q + bias), rounded to
// nearest even as f32_to_bf16 rounds the dequantized copy. The same bits as that copy wherever scale * q is exact in
// f32 (so the fma rounds once, as decode_affine_row's multiply-add does: true of every format we load) and the value
// is not an f32 subnormal (cvtne2ps flushes those to zero). `pairs` points at the (scale, bias) of i0's group; groups
// of 16 (kSplit) give the upper eight lanes the next group's.
template <int kBits, bool kSplit>
__m512i decode_pairs(const uint8_t* codes, const float* pairs, int64_t i0) {
  __m512i d;
  if constexpr (kBits == 4)
    d = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codes + i0 / 2)));
  else
    d = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes + i0)));
  const __m512i mask = _mm512_set1_epi32((1 << kBits) - 1);
  const __m512 even = _mm512_cvtepi32_ps(_mm512_and_si512(d, mask));
  const __m512 odd = _mm512_cvtepi32_ps(_mm512_srli_epi32(d, kBits));
  __m512 scale, bias;
  if constexpr (kSplit) {
    const __m512 low = _mm512_castps128_ps512(_mm_loadu_ps(pairs));  // scale, bias of two groups
    scale = _mm512_permutexvar_ps(_mm512_set_epi32(2, 2, 2, 2, 2, 2, 2, 2, 0, 0, 0, 0, 0, 0, 0, 0), low);
    bias = _mm512_permutexvar_ps(_mm512_set_epi32(3, 3, 3, 3, 3, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1), low);
  } else {
    scale = _mm512_set1_ps(pairs[0]);
    bias = _mm512_set1_ps(pairs[1]);
  }
  // Words 0..15: the even inputs, 16..31: the odd ones; then interleaved into pairs.
  const __m512i words =
      (__m512i)_mm512_cvtne2ps_pbh(_mm512_fmadd_ps(odd, scale, bias), _mm512_fmadd_ps(even, scale, bias));
  alignas(64) static const uint16_t kInterleave[32] = {0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
                                                       8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  return _mm512_permutexvar_epi16(_mm512_load_si512(kInterleave), words);
}

// Decodes input pairs [p0, p0 + block_pairs) of the 64 rows from `row0` (rows past the weight: zero) into `block`
// ([block_pairs][64][2] bf16).
template <int kBits, bool kSplit>
void decode_block(const LinearWeight& w, int64_t row0, int64_t p0, int64_t block_pairs, uint16_t* block) {
  const int64_t in = w.in_features, group = w.scale_block_cols, groups = in / group, row_bytes = in * kBits / 8;
  for (int64_t r0 = 0; r0 < kPackedPanelCols; r0 += 16) {
    for (int64_t p = 0; p < block_pairs; p += 16) {
      const int64_t i0 = 2 * (p0 + p), g0 = i0 / group;
      __m512i rows[16];
      for (int r = 0; r < 16; ++r) {
        const int64_t row = row0 + r0 + r;
        // 16 rows are read side by side, 16 (4-bit) or 32 bytes each per step: too many streams for the hardware
        // prefetcher alone (decoding stalled on memory at batch 16).
        const uintptr_t ahead = reinterpret_cast<uintptr_t>(w.weight.data_as<uint8_t>() + row * row_bytes) +
                                i0 * kBits / 8 + kDecodePrefetchBytes;
        _mm_prefetch(reinterpret_cast<const char*>(ahead), _MM_HINT_T0);
        rows[r] = row < w.out_features
                      ? decode_pairs<kBits, kSplit>(w.weight.data_as<uint8_t>() + row * row_bytes,
                                                    w.scales.data_as<float>() + (row * groups + g0) * 2, i0)
                      : _mm512_setzero_si512();
      }
      transpose16(rows);
      for (int j = 0; j < 16; ++j) _mm512_storeu_si512(block + (p + j) * kPackedPanelCols * 2 + r0 * 2, rows[j]);
    }
  }
}

template <int kBits>
void gemm_panels(const uint16_t* x, int64_t tokens, int64_t x_stride, const LinearWeight& w, float* out,
                 int64_t out_stride, int64_t panel_begin, int64_t panel_end) {
  const int64_t pairs = w.in_features / 2;
  thread_local std::unique_ptr<uint16_t[]> block;
  if (!block) block = std::make_unique_for_overwrite<uint16_t[]>(kGemmBlockPairs * kPackedPanelCols * 2);
  for (int64_t panel = panel_begin; panel < panel_end; ++panel) {
    const int64_t col0 = panel * kPackedPanelCols, cols = std::min(kPackedPanelCols, w.out_features - col0);
    for (int64_t p0 = 0; p0 < pairs; p0 += kGemmBlockPairs) {
      const int64_t n = std::min(kGemmBlockPairs, pairs - p0);
      if (w.scale_block_cols < 32)
        decode_block<kBits, true>(w, col0, p0, n, block.get());
      else
        decode_block<kBits, false>(w, col0, p0, n, block.get());
      gemm_bf16_panel_block(x + 2 * p0, tokens, x_stride, block.get(), n, cols, out + col0, out_stride, p0 > 0,
                            nullptr);
    }
  }
}

void run_gemm(const uint16_t* x, int64_t tokens, const LinearWeight& w, float* out, int64_t out_stride,
              int64_t panel_begin, int64_t panel_end) {
  if (w.bits == 4)
    gemm_panels<4>(x, tokens, w.in_features, w, out, out_stride, panel_begin, panel_end);
  else
    gemm_panels<8>(x, tokens, w.in_features, w, out, out_stride, panel_begin, panel_end);
}

void round_rows(const float* x, int64_t count, uint16_t* out) {
  for (int64_t i = 0; i < count; ++i) out[i] = f32_to_bf16(x[i]);
}

}  // namespace

void affine_gemv(const float* x, int64_t tokens, const LinearWeight& w, float* out, int64_t row_begin, int64_t row_end,
                 const CompactScales* compact) {
  RS_CHECK(affine_kernel_supports(w), "affine_gemv: unsupported weight");
  GemvActivations a;
  prepare_gemv(x, tokens, w, compact, a);
  run_gemv(a, tokens, w, out, w.out_features, row_begin, row_end);
}

void affine_gemm(const float* x, int64_t tokens, const LinearWeight& w, float* out, int64_t panel_begin,
                 int64_t panel_end) {
  RS_CHECK(affine_kernel_supports(w), "affine_gemm: unsupported weight");
  std::vector<uint16_t> xb(tokens * w.in_features);
  round_rows(x, tokens * w.in_features, xb.data());
  run_gemm(xb.data(), tokens, w, out, w.out_features, panel_begin, panel_end);
}

void affine_linear(ThreadPool& pool, const float* x, int64_t tokens, const LinearWeight& w, const float* bias,
                   float* out, int64_t out_stride, bool row_invariant, const CompactScales* compact) {
  RS_CHECK(affine_kernel_supports(w), "affine_linear: unsupported weight");
  if (tokens == 0) return;  // e.g. a step without rows for this layer's MoE expert
  const int64_t in = w.in_features, cols = w.out_features;
  // The calling thread's grow-only scratch: workers read it while the caller waits in parallel_for.
  if (tokens <= kAffineGemvTokens && !row_invariant) {
    thread_local GemvActivations scratch;
    const GemvActivations* a = &scratch;  // the caller's copy (a thread_local named in the lambda is the worker's)
    prepare_gemv(x, tokens, w, compact, scratch);
    pool.parallel_for(
        cols,
        [&](int64_t begin, int64_t end) {
          run_gemv(*a, tokens, w, out, out_stride, begin, end);
          if (bias)
            for (int64_t t = 0; t < tokens; ++t)
              for (int64_t c = begin; c < end; ++c) out[t * out_stride + c] += bias[c];
        },
        16);
    return;
  }
  thread_local std::vector<uint16_t> scratch;
  scratch.resize(tokens * in);
  uint16_t* xb = scratch.data();
  pool.parallel_for(
      tokens, [&](int64_t begin, int64_t end) { round_rows(x + begin * in, (end - begin) * in, xb + begin * in); });
  pool.parallel_for(packed_panels(cols), [&](int64_t begin, int64_t end) {
    run_gemm(xb, tokens, w, out, out_stride, begin, end);
    if (bias) {
      const int64_t c0 = begin * kPackedPanelCols, c1 = std::min(cols, end * kPackedPanelCols);
      for (int64_t t = 0; t < tokens; ++t)
        for (int64_t c = c0; c < c1; ++c) out[t * out_stride + c] += bias[c];
    }
  });
}

#else

void affine_linear(ThreadPool&, const float*, int64_t, const LinearWeight&, const float*, float*, int64_t, bool,
                   const CompactScales*) {
  RS_FAIL("affine_linear needs a build with AVX512-BF16");
}
void affine_gemv(const float*, int64_t, const LinearWeight&, float*, int64_t, int64_t, const CompactScales*) {
  RS_FAIL("affine_gemv needs a build with AVX512-BF16");
}
void affine_gemm(const float*, int64_t, const LinearWeight&, float*, int64_t, int64_t) {
  RS_FAIL("affine_gemm needs a build with AVX512-BF16");
}

#endif

}  // namespace rs::cpu
