// Small vector helpers shared by the CPU kernels: dtype-converting row loads and dot products (AVX-512 when built for
// it).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "backend/cpu/kernels/simd.h"

#include "tensor/tensor.h"

namespace rs::cpu {

// Converts row `row` of a 2-D f32/bf16/f16 tensor into f32.
inline void load_row(const Tensor& t, int64_t row, float* out, int64_t width) {
  switch (t.dtype()) {
    case DType::kF32: std::memcpy(out, t.data_as<float>() + row * width, width * sizeof(float)); return;
    case DType::kBF16: {
      const uint16_t* in = t.data_as<uint16_t>() + row * width;
      for (int64_t i = 0; i < width; ++i) out[i] = bf16_to_f32(in[i]);
      return;
    }
    case DType::kF16: {
      const uint16_t* in = t.data_as<uint16_t>() + row * width;
      for (int64_t i = 0; i < width; ++i) out[i] = f16_to_f32(in[i]);
      return;
    }
    default: RS_FAIL("cannot read {} values as floats", dtype_name(t.dtype()));
  }
}

inline float dot_f32(const float* a, const float* b, int64_t n) {
#if defined(__AVX512F__)
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc0);
    acc1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), acc1);
  }
  float sum = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
#else
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += a[i] * b[i];
  return sum;
#endif
}

#if defined(__AVX512F__)
// e^x for 16 lanes: 2^n * p(r) with x = n ln2 + r, |r| <= ln2/2, degree-6 polynomial (relative error ~2e-7, close to
// std::exp). Inputs below -87.3 give 0 (as softmax and silu want); above 88.7 give inf.
inline __m512 exp_f32x16(__m512 x) {
  x = _mm512_max_ps(x, _mm512_set1_ps(-87.3f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606765330187045e-06f), r);
  __m512 p = _mm512_set1_ps(1.0f / 720);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}
#endif

#if defined(__AVX512F__)
// 16 bf16 values widened to f32 (exact).
inline __m512 load_bf16x16(const uint16_t* p) {
  return _mm512_castsi512_ps(
      _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))), 16));
}
#endif

// out[i] = f32(x[i]) for bf16 x (exact).
inline void bf16_row_to_f32(const uint16_t* x, int64_t n, float* out) {
  int64_t i = 0;
#if defined(__AVX512F__)
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(out + i, load_bf16x16(x + i));
#endif
  for (; i < n; ++i) out[i] = bf16_to_f32(x[i]);
}

// out[i] = bf16(x[i]), round to nearest even (as f32_to_bf16; the AVX512-BF16 path flushes subnormals to zero).
inline void round_row_to_bf16(const float* x, int64_t n, uint16_t* out) {
  int64_t i = 0;
#if defined(__AVX512BF16__)
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(x + i)));
#endif
  for (; i < n; ++i) out[i] = f32_to_bf16(x[i]);
}

// y[i] = e^(x[i] - shift)
inline void exp_shifted_f32(const float* x, float shift, float* y, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512F__)
  const __m512 vs = _mm512_set1_ps(shift);
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, exp_f32x16(_mm512_sub_ps(_mm512_loadu_ps(x + i), vs)));
  if (i < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(y + i, m, exp_f32x16(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), vs)));
    return;
  }
#endif
  for (; i < n; ++i) y[i] = std::exp(x[i] - shift);
}

// y += alpha * x
inline void axpy_f32(float alpha, const float* x, float* y, int64_t n) {
#if defined(__AVX512F__)
  const __m512 va = _mm512_set1_ps(alpha);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(y + i, _mm512_fmadd_ps(va, _mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i)));
  for (; i < n; ++i) y[i] += alpha * x[i];
#else
  for (int64_t i = 0; i < n; ++i) y[i] += alpha * x[i];
#endif
}

}  // namespace rs::cpu
