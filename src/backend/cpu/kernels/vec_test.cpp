// The vector helpers (vec.h) in whichever form this build compiled (AVX-512, AVX2 + FMA, or scalar) against scalar
// double references, at lengths that leave a remainder after every vector width.
#include "backend/cpu/kernels/vec.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace rs::cpu {
namespace {

std::vector<float> random_values(int64_t n, float lo, float hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

TEST(Vec, ExpShiftedIsCloseToStdExp) {
  for (int64_t n : {1, 7, 8, 15, 16, 17, 129}) {
    const std::vector<float> x = random_values(n, -95.0f, 20.0f, static_cast<uint32_t>(n));
    std::vector<float> y(n);
    exp_shifted_f32(x.data(), -5.0f, y.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      const float arg = x[i] - -5.0f;  // rounded to f32 as the kernels round it
      const double want = std::exp(static_cast<double>(arg));
      if (arg < -87.3f) {
        EXPECT_LE(y[i], 1.25e-38) << "x " << x[i];  // clamped to e^-87.3 or below: nothing, to a softmax
      } else {
        EXPECT_NEAR(y[i], want, 1e-6 * want) << "x " << x[i];
      }
    }
  }
}

TEST(Vec, DotAxpyAndBf16RowsMatchScalarReferences) {
  for (int64_t n : {1, 9, 33, 64, 100, 257}) {
    const std::vector<float> a = random_values(n, -1.0f, 1.0f, 1), b = random_values(n, -1.0f, 1.0f, 2);
    double dot = 0.0, magnitude = 0.0;
    for (int64_t i = 0; i < n; ++i) dot += double{a[i]} * b[i], magnitude += std::abs(double{a[i]} * b[i]);
    EXPECT_NEAR(dot_f32(a.data(), b.data(), n), dot, 1e-6 * magnitude + 1e-7) << n;

    std::vector<float> y = b;
    axpy_f32(0.375f, a.data(), y.data(), n);
    for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(y[i], b[i] + 0.375 * a[i], 1e-7) << n;

    std::vector<uint16_t> bf16(n);
    for (int64_t i = 0; i < n; ++i) bf16[i] = f32_to_bf16(a[i]);
    std::vector<float> widened(n);
    bf16_row_to_f32(bf16.data(), n, widened.data());
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(widened[i], bf16_to_f32(bf16[i])) << n;
  }
}

}  // namespace
}  // namespace rs::cpu
