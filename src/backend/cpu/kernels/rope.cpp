// Rotary position embedding on CPU: NeoX half-split layout, table of cos|sin per position (scaling folded in).
#include "backend/cpu/kernels/kernels.h"

namespace rs::cpu {

void rope(ThreadPool& pool, Tensor x, const Tensor& positions, const Tensor& cos_sin, int32_t rotary_dim) {
  const int64_t tokens = x.dim(0), heads = x.dim(1), hd = x.dim(2);
  const int32_t half = rotary_dim / 2;
  RS_CHECK(rotary_dim <= hd && cos_sin.dim(1) == rotary_dim, "rope: rotary dim {} for head dim {}", rotary_dim, hd);
  const int32_t* pos = positions.data_as<int32_t>();
  for (int64_t t = 0; t < tokens; ++t)
    RS_CHECK(pos[t] >= 0 && pos[t] < cos_sin.dim(0), "position {} beyond the RoPE table of {}", pos[t], cos_sin.dim(0));
  pool.parallel_for(tokens, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const float* c = cos_sin.data_as<float>() + pos[t] * rotary_dim;
      const float* s = c + half;
      for (int64_t h = 0; h < heads; ++h) {
        float* v = x.data_as<float>() + (t * heads + h) * hd;
        for (int32_t i = 0; i < half; ++i) {
          const float a = v[i], b = v[i + half];
          v[i] = a * c[i] - b * s[i];
          v[i + half] = b * c[i] + a * s[i];
        }
      }
    }
  });
}

}  // namespace rs::cpu
