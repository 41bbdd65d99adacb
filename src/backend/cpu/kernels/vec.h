// Small vector helpers shared by the CPU kernels: dtype-converting row loads and dot products (AVX-512 when built for
// it, else AVX2 + FMA for the ones the fallback attention runs per key).
#pragma once

#include <array>
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

#if defined(RS_TARGET_AVX2)
// The sum of the 8 lanes.
RS_TARGET_AVX2 inline float sum_f32x8(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 s2 = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

// Eight bf16 values widened to f32 (exact: a bf16 is the top half of its f32).
RS_TARGET_AVX2 inline __m256 load_bf16x8(const uint16_t* p) {
  const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
}

// exp_f32x16 for 8 lanes: the same reduction and polynomial, 2^n built in the exponent bits (n >= -126 after the
// clamp, so 2^n is normal; n = 128 gives inf, as it should). Compiled for AVX2 + FMA in every x86 build (the kernels
// that carry RS_TARGET_AVX2 call it).
RS_TARGET_AVX2 inline __m256 exp_f32x8(__m256 x) {
  x = _mm256_max_ps(x, _mm256_set1_ps(-87.3f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.428606765330187045e-06f), r);
  __m256 p = _mm256_set1_ps(1.0f / 720);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
}
#endif

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
#elif defined(__AVX2__) && defined(__FMA__)
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps(), acc2 = _mm256_setzero_ps(), acc3 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
    acc2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 16), _mm256_loadu_ps(b + i + 16), acc2);
    acc3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 24), _mm256_loadu_ps(b + i + 24), acc3);
  }
  for (; i + 8 <= n; i += 8) acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
  float sum = sum_f32x8(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));
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
#elif defined(__AVX2__) && defined(__FMA__)
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, load_bf16x8(x + i));
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

// e4m3 code -> f32 value (NaN for the two NaN codes).
inline const float* fp8_e4m3_values() {
  static const auto table = [] {
    std::array<float, 256> values{};
    for (int code = 0; code < 256; ++code) values[code] = fp8_e4m3_to_f32(static_cast<uint8_t>(code));
    return values;
  }();
  return table.data();
}

// out[i] = e4m3 value of code x[i] times scale, one f32 rounding (an fp8 KV cache row, exactly dequantized).
inline void fp8_row_to_f32(const uint8_t* x, int64_t n, float scale, float* out) {
  const float* values = fp8_e4m3_values();
  int64_t i = 0;
#if defined(__AVX512F__)
  const __m512 s = _mm512_set1_ps(scale);
  for (; i + 16 <= n; i += 16) {
    const __m512i codes = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i)));
    _mm512_storeu_ps(out + i, _mm512_mul_ps(_mm512_i32gather_ps(codes, values, 4), s));
  }
#endif
  for (; i < n; ++i) out[i] = values[x[i]] * scale;
}

// out[i] = f32_to_fp8_e4m3(x[i] / scale): to nearest even, saturated to +-448, NaN -> 0x7f (the same codes as the
// scalar function and as CUDA's __nv_cvt_float_to_fp8 with satfinite).
inline void fp8_row_from_f32(const float* x, int64_t n, float scale, uint8_t* out) {
  int64_t i = 0;
#if defined(__AVX512F__) && defined(__AVX512BW__)
  const __m512 s = _mm512_set1_ps(scale), max = _mm512_set1_ps(kFp8E4M3Max);
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
  for (; i + 16 <= n; i += 16) {
    const __m512 v = _mm512_div_ps(_mm512_loadu_ps(x + i), s);
    const __m512i bits = _mm512_castps_si512(v);
    const __m512i sign = _mm512_and_si512(_mm512_srli_epi32(bits, 24), _mm512_set1_epi32(0x80));
    const __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(bits, abs_mask), inf);
    const __m512 a = _mm512_min_ps(_mm512_castsi512_ps(_mm512_and_si512(bits, abs_mask)), max);
    // Normals: round the f32 mantissa to 3 bits, ties to even, letting the carry run into the exponent.
    const __m512i ab = _mm512_castps_si512(a);
    const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(ab, 20), _mm512_set1_epi32(1));
    const __m512i rounded =
        _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(ab, _mm512_set1_epi32(0x7ffff)), odd), 20);
    const __m512i normal = _mm512_sub_epi32(rounded, _mm512_set1_epi32((127 - 7) << 3));
    // Below 2^-6: steps of 2^-9, to nearest even (the default rounding mode).
    const __m512i subnormal = _mm512_cvtps_epi32(_mm512_mul_ps(a, _mm512_set1_ps(512.0f)));
    const __mmask16 small = _mm512_cmplt_ps_mask(a, _mm512_set1_ps(0.015625f));
    __m512i code = _mm512_or_si512(_mm512_mask_blend_epi32(small, normal, subnormal), sign);
    code = _mm512_mask_blend_epi32(nan, code, _mm512_set1_epi32(0x7f));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm512_cvtepi32_epi8(code));
  }
#endif
  for (; i < n; ++i) out[i] = f32_to_fp8_e4m3(x[i] / scale);
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
#elif defined(__AVX2__) && defined(__FMA__)
  const __m256 vs = _mm256_set1_ps(shift);
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, exp_f32x8(_mm256_sub_ps(_mm256_loadu_ps(x + i), vs)));
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
#elif defined(__AVX2__) && defined(__FMA__)
  const __m256 va = _mm256_set1_ps(alpha);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  for (; i < n; ++i) y[i] += alpha * x[i];
#else
  for (int64_t i = 0; i < n; ++i) y[i] += alpha * x[i];
#endif
}

}  // namespace rs::cpu
