// Structured output's token mask on the host: -inf on every logit whose bit is clear (the reference for CUDA's kernel).
#include <algorithm>
#include <limits>

#include "backend/cpu/kernels/kernels.h"

namespace rs::cpu {

void apply_token_bitmask(Tensor logits, const Tensor& bitmask) {
  const int64_t rows = logits.dim(0), vocab = logits.dim(1), words = bitmask.dim(1);
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  for (int64_t r = 0; r < rows; ++r) {
    float* row = logits.data_as<float>() + r * vocab;
    const uint32_t* bits = static_cast<const uint32_t*>(bitmask.data()) + r * words;
    for (int64_t w = 0; w < words; ++w) {
      const uint32_t word = bits[w];
      if (word == 0xFFFFFFFFu) continue;
      const int64_t end = std::min<int64_t>(32, vocab - w * 32);
      if (word == 0) {  // most words of a structural state: a plain fill the compiler vectorises
        std::fill_n(row + w * 32, end, kNegInf);
        continue;
      }
      for (int64_t b = 0; b < end; ++b)
        if (!((word >> b) & 1u)) row[w * 32 + b] = kNegInf;
    }
  }
}

}  // namespace rs::cpu
