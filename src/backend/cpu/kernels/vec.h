// Small vector helpers shared by the CPU kernels: dtype-converting row loads and dot products (AVX-512 when built for it).
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "tensor/tensor.h"

namespace rs::cpu {

// Converts row `row` of a 2-D f32/bf16/f16 tensor into f32.
inline void load_row(const Tensor& t, int64_t row, float* out, int64_t width) {
  switch (t.dtype()) {
    case DType::kF32:
      std::memcpy(out, t.data_as<float>() + row * width, width * sizeof(float));
      return;
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
    default:
      RS_FAIL("cannot read {} values as floats", dtype_name(t.dtype()));
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

// y += alpha * x
inline void axpy_f32(float alpha, const float* x, float* y, int64_t n) {
#if defined(__AVX512F__)
  const __m512 va = _mm512_set1_ps(alpha);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, _mm512_fmadd_ps(va, _mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i)));
  for (; i < n; ++i) y[i] += alpha * x[i];
#else
  for (int64_t i = 0; i < n; ++i) y[i] += alpha * x[i];
#endif
}

}  // namespace rs::cpu
