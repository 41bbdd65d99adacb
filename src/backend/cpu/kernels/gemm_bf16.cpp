#include "backend/cpu/kernels/gemm_bf16.h"

#if defined(__AVX512BF16__)
#include <immintrin.h>
#endif

#include "base/error.h"
#include "tensor/dtype.h"

namespace rs::cpu {

#if defined(__AVX512BF16__)

bool has_bf16_gemm() { return true; }

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

}  // namespace

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

#endif

}  // namespace rs::cpu
