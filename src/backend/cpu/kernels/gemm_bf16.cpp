#include "backend/cpu/kernels/gemm_bf16.h"

#include "backend/cpu/kernels/gemv_avx2.h"

#include <algorithm>
#include <cstring>

#include "backend/cpu/kernels/simd.h"
#include "base/error.h"
#include "tensor/dtype.h"

namespace rs::cpu {

void pack_bf16_weight(const uint16_t* w, int64_t out, int64_t in, uint16_t* packed) {
  const int64_t pairs = packed_in_pairs(in);
  std::memset(packed, 0, packed_elements(out, in) * sizeof(uint16_t));
  for (int64_t c = 0; c < out; ++c) {
    uint16_t* dst = packed + (c / kPackedPanelCols) * pairs * kPackedPanelCols * 2 + (c % kPackedPanelCols) * 2;
    const uint16_t* row = w + c * in;
    for (int64_t k = 0; k < in; ++k) dst[(k / 2) * kPackedPanelCols * 2 + (k & 1)] = row[k];
  }
}

#if defined(__AVX512BF16__)

// RS_CPU_KERNELS=avx2 runs a machine with these kernels as one without (tests and benchmarks of kernels/gemv_avx2).
bool has_bf16_gemm() { return !avx2_kernels_forced(); }

namespace {

// A tile of kRows weight rows x kTokens tokens, each accumulator summing 32 products per step.
template <int kRows, int kTokens>
void tile(const uint16_t* x, const uint16_t* w, int64_t in, float* out, int64_t out_stride) {
  __m512 acc[kRows][kTokens];
  for (int r = 0; r < kRows; ++r)
    for (int t = 0; t < kTokens; ++t) acc[r][t] = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + 32 <= in; k += 32) {
    __m512bh wv[kRows], xv[kTokens];
    for (int r = 0; r < kRows; ++r) wv[r] = (__m512bh)_mm512_loadu_si512(w + r * in + k);
    for (int t = 0; t < kTokens; ++t) xv[t] = (__m512bh)_mm512_loadu_si512(x + t * in + k);
    for (int r = 0; r < kRows; ++r)
      for (int t = 0; t < kTokens; ++t) acc[r][t] = _mm512_dpbf16_ps(acc[r][t], wv[r], xv[t]);
  }
  for (int r = 0; r < kRows; ++r)
    for (int t = 0; t < kTokens; ++t) {
      float sum = _mm512_reduce_add_ps(acc[r][t]);
      for (int64_t j = k; j < in; ++j) sum += bf16_to_f32(w[r * in + j]) * bf16_to_f32(x[t * in + j]);
      out[t * out_stride + r] = sum;
    }
}

template <int kRows>
void row_block(const uint16_t* x, int64_t num_tokens, const uint16_t* w, int64_t in, float* out, int64_t out_stride) {
  int64_t t = 0;
  for (; t + 4 <= num_tokens; t += 4) tile<kRows, 4>(x + t * in, w, in, out + t * out_stride, out_stride);
  for (; t < num_tokens; ++t) tile<kRows, 1>(x + t * in, w, in, out + t * out_stride, out_stride);
}

// Panel kernel: kTokens tokens x 64 columns (4 zmm of 16) over input pairs [0, pairs). Each step loads the 4 weight
// vectors once and broadcasts one activation pair per token, so no horizontal sums are needed.
template <int kTokens>
void panel_tile(const uint16_t* x, int64_t x_stride, const uint16_t* panel, int64_t pairs, float* out,
                int64_t out_stride, __mmask16 last_mask, int full_blocks, bool accumulate, const char* prefetch) {
  __m512 acc[kTokens][4];
  for (int t = 0; t < kTokens; ++t)
    for (int j = 0; j < 4; ++j)
      acc[t][j] = accumulate && j <= full_blocks
                      ? _mm512_maskz_loadu_ps(j < full_blocks ? 0xFFFF : last_mask, out + t * out_stride + 16 * j)
                      : _mm512_setzero_ps();
  const int32_t* xp = reinterpret_cast<const int32_t*>(x);
  const int64_t x_pair_stride = x_stride / 2;
  for (int64_t p = 0; p < pairs; ++p) {
    const uint16_t* wp = panel + p * kPackedPanelCols * 2;
    if (prefetch) _mm_prefetch(prefetch + 64 * p, _MM_HINT_T1);
    __m512bh w[4];
    for (int j = 0; j < 4; ++j) w[j] = (__m512bh)_mm512_loadu_si512(wp + 32 * j);
    for (int t = 0; t < kTokens; ++t) {
      const __m512bh xv = (__m512bh)_mm512_set1_epi32(xp[t * x_pair_stride + p]);
      for (int j = 0; j < 4; ++j) acc[t][j] = _mm512_dpbf16_ps(acc[t][j], w[j], xv);
    }
  }
  for (int t = 0; t < kTokens; ++t)
    for (int j = 0; j < 4; ++j) {
      if (j < full_blocks)
        _mm512_storeu_ps(out + t * out_stride + 16 * j, acc[t][j]);
      else if (j == full_blocks && last_mask)
        _mm512_mask_storeu_ps(out + t * out_stride + 16 * j, last_mask, acc[t][j]);
    }
}

constexpr int kTileTokens = 6;  // 6 x 4 accumulators + 4 weight vectors fit the 32 zmm registers

}  // namespace

void gemm_bf16_panel_block(const uint16_t* x, int64_t num_tokens, int64_t x_stride, const uint16_t* block,
                           int64_t block_pairs, int64_t cols, float* out, int64_t out_stride, bool accumulate,
                           const uint16_t* next_block) {
  if (num_tokens <= 0) return;
  const int full_blocks = static_cast<int>(cols / 16);
  const __mmask16 last_mask = static_cast<__mmask16>((1u << (cols % 16)) - 1);
  // Tokens split into ceil(T / 6) tiles of near-equal size (128 = 18 x 6 + 4 x 5) rather than 6s plus a small,
  // load-bound remainder tile.
  const int64_t tiles = (num_tokens + kTileTokens - 1) / kTileTokens;
  const int64_t base = num_tokens / tiles, extra = num_tokens % tiles;
  int64_t t = 0;
  for (int64_t i = 0; i < tiles; ++i) {
    const int64_t size = base + (i < extra ? 1 : 0);
    const uint16_t* xt = x + t * x_stride;
    float* ot = out + t * out_stride;
    // The first four tiles each pull a quarter of the next weight block (one line per step) into L2, so the weights
    // stream from DRAM while this block computes instead of stalling the next block's first tile.
    const char* pf = next_block && i < 4 ? reinterpret_cast<const char*>(next_block) + i * block_pairs * 64 : nullptr;
    const uint16_t* w = block;
    const int64_t n = block_pairs;
    switch (size) {
      case 6: panel_tile<6>(xt, x_stride, w, n, ot, out_stride, last_mask, full_blocks, accumulate, pf); break;
      case 5: panel_tile<5>(xt, x_stride, w, n, ot, out_stride, last_mask, full_blocks, accumulate, pf); break;
      case 4: panel_tile<4>(xt, x_stride, w, n, ot, out_stride, last_mask, full_blocks, accumulate, pf); break;
      case 3: panel_tile<3>(xt, x_stride, w, n, ot, out_stride, last_mask, full_blocks, accumulate, pf); break;
      case 2: panel_tile<2>(xt, x_stride, w, n, ot, out_stride, last_mask, full_blocks, accumulate, pf); break;
      default: panel_tile<1>(xt, x_stride, w, n, ot, out_stride, last_mask, full_blocks, accumulate, pf); break;
    }
    t += size;
  }
}

void gemm_bf16_packed(const uint16_t* x, int64_t num_tokens, int64_t x_stride, const uint16_t* packed, int64_t in,
                      int64_t out_cols, float* out, int64_t out_stride, int64_t panel_begin, int64_t panel_end) {
  const int64_t pairs = packed_in_pairs(in);
  for (int64_t panel = panel_begin; panel < panel_end; ++panel) {
    const int64_t col0 = panel * kPackedPanelCols;
    const int64_t cols = std::min(kPackedPanelCols, out_cols - col0);
    const uint16_t* panel_w = packed + panel * pairs * kPackedPanelCols * 2;
    for (int64_t p0 = 0; p0 < pairs; p0 += kGemmBlockPairs) {
      const int64_t block = std::min(kGemmBlockPairs, pairs - p0);
      const uint16_t* w = panel_w + p0 * kPackedPanelCols * 2;
      gemm_bf16_panel_block(x + 2 * p0, num_tokens, x_stride, w, block, cols, out + col0, out_stride, p0 > 0,
                            w + block * kPackedPanelCols * 2);
    }
  }
}

namespace {

// kTokens f32 activations x one 64-column panel. A packed zmm holds 16 (even, odd) weight pairs: shifting left by 16
// widens the even inputs' weights to f32 and masking the low half the odd ones'.
template <int kTokens>
void panel_gemv(const float* x, int64_t in, const uint16_t* panel, float* out, int64_t out_stride, __mmask16 last_mask,
                int full_blocks) {
  const int64_t pairs = packed_in_pairs(in);
  const int64_t full_pairs = in / 2;
  const __m512i high = _mm512_set1_epi32(static_cast<int32_t>(0xFFFF0000u));
  __m512 acc[kTokens][4];
  for (int t = 0; t < kTokens; ++t)
    for (int j = 0; j < 4; ++j) acc[t][j] = _mm512_setzero_ps();
  for (int64_t p = 0; p < pairs; ++p) {
    const uint16_t* wp = panel + p * kPackedPanelCols * 2;
    __m512 even[4], odd[4];
    for (int j = 0; j < 4; ++j) {
      const __m512i w = _mm512_loadu_si512(wp + 32 * j);
      even[j] = _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
      odd[j] = _mm512_castsi512_ps(_mm512_and_si512(w, high));
    }
    for (int t = 0; t < kTokens; ++t) {
      const __m512 xe = _mm512_set1_ps(x[t * in + 2 * p]);
      const __m512 xo = _mm512_set1_ps(p < full_pairs ? x[t * in + 2 * p + 1] : 0.0f);
      for (int j = 0; j < 4; ++j) acc[t][j] = _mm512_fmadd_ps(odd[j], xo, _mm512_fmadd_ps(even[j], xe, acc[t][j]));
    }
  }
  for (int t = 0; t < kTokens; ++t)
    for (int j = 0; j < 4; ++j) {
      if (j < full_blocks)
        _mm512_storeu_ps(out + t * out_stride + 16 * j, acc[t][j]);
      else if (j == full_blocks && last_mask)
        _mm512_mask_storeu_ps(out + t * out_stride + 16 * j, last_mask, acc[t][j]);
    }
}

}  // namespace

void gemv_bf16_packed(const float* x, int64_t num_tokens, const uint16_t* packed, int64_t in, int64_t out_cols,
                      float* out, int64_t out_stride, int64_t panel_begin, int64_t panel_end) {
  const int64_t panel_elems = packed_in_pairs(in) * kPackedPanelCols * 2;
  for (int64_t panel = panel_begin; panel < panel_end; ++panel) {
    const int64_t col0 = panel * kPackedPanelCols;
    const int64_t cols = std::min(kPackedPanelCols, out_cols - col0);
    const int full_blocks = static_cast<int>(cols / 16);
    const __mmask16 last_mask = static_cast<__mmask16>((1u << (cols % 16)) - 1);
    const uint16_t* w = packed + panel * panel_elems;
    float* o = out + col0;
    for (int64_t t = 0; t < num_tokens;) {
      const int64_t step = std::min<int64_t>(num_tokens - t, 4);
      const float* xt = x + t * in;
      float* ot = o + t * out_stride;
      switch (step) {
        case 4: panel_gemv<4>(xt, in, w, ot, out_stride, last_mask, full_blocks); break;
        case 3: panel_gemv<3>(xt, in, w, ot, out_stride, last_mask, full_blocks); break;
        case 2: panel_gemv<2>(xt, in, w, ot, out_stride, last_mask, full_blocks); break;
        default: panel_gemv<1>(xt, in, w, ot, out_stride, last_mask, full_blocks); break;
      }
      t += step;
    }
  }
}

void gemm_bf16(const uint16_t* x, int64_t num_tokens, const uint16_t* w, int64_t in, float* out, int64_t out_stride,
               int64_t row_begin, int64_t row_end) {
  // Weight rows in blocks of 4 stay in L1 while every token streams past them.
  int64_t r = row_begin;
  for (; r + 4 <= row_end; r += 4) row_block<4>(x, num_tokens, w + r * in, in, out + r, out_stride);
  for (; r < row_end; ++r) row_block<1>(x, num_tokens, w + r * in, in, out + r, out_stride);
}

#else

bool has_bf16_gemm() { return false; }

void gemm_bf16(const uint16_t*, int64_t, const uint16_t*, int64_t, float*, int64_t, int64_t, int64_t) {
  RS_FAIL("gemm_bf16 needs a build with AVX512-BF16");
}
void gemm_bf16_packed(const uint16_t*, int64_t, int64_t, const uint16_t*, int64_t, int64_t, float*, int64_t, int64_t,
                      int64_t) {
  RS_FAIL("gemm_bf16_packed needs a build with AVX512-BF16");
}
void gemm_bf16_panel_block(const uint16_t*, int64_t, int64_t, const uint16_t*, int64_t, int64_t, float*, int64_t, bool,
                           const uint16_t*) {
  RS_FAIL("gemm_bf16_panel_block needs a build with AVX512-BF16");
}
void gemv_bf16_packed(const float*, int64_t, const uint16_t*, int64_t, int64_t, float*, int64_t, int64_t, int64_t) {
  RS_FAIL("gemv_bf16_packed needs a build with AVX512-BF16");
}

#endif

}  // namespace rs::cpu
