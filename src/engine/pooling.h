// Embedding arithmetic shared by the engine (pooled rows) and the server (Matryoshka truncation).
#pragma once

#include <algorithm>
#include <cmath>
#include <span>

namespace rs::engine {

// Scales `v` to unit L2 norm (as torch.nn.functional.normalize: the norm floored at 1e-12), in double for the sum.
inline void l2_normalize(std::span<float> v) {
  double sum = 0.0;
  for (float x : v) sum += static_cast<double>(x) * x;
  const double scale = 1.0 / std::max(std::sqrt(sum), 1e-12);
  for (float& x : v) x = static_cast<float>(x * scale);
}

}  // namespace rs::engine
