// The integer (kAffine) CPU kernels against references built here: the GEMM bit for bit against the bf16 GEMM over a
// bf16 copy dequantized row by row (what the fast path ran before), the GEMV within the rounding of its activations to
// bf16 of the exact f32 product, and both through affine_linear's threads and its row-invariant mode.
#include "backend/cpu/kernels/gemm_affine.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "backend/cpu/kernels/gemm_bf16.h"
#include "backend/cpu/kernels/kernels.h"
#include "tensor/dtype.h"

namespace rs::cpu {
namespace {

struct AffineWeight {
  std::vector<uint8_t> codes;
  std::vector<float> pairs;
  LinearWeight w;
  std::vector<float> dequantized;  // [out, in]: scale * q + bias in f32, written longhand here
};

// symmetric: bias = -2^(bits-1) scale, as GGUF's Q8_0 / Q6_K / Q4_0 load (w = d * (q - offset)); else independent.
AffineWeight random_affine(int64_t out, int64_t in, int bits, int64_t group, uint32_t seed, bool symmetric = false) {
  std::mt19937 rng(seed);
  AffineWeight a;
  a.codes.resize(out * in * bits / 8);
  for (auto& c : a.codes) c = static_cast<uint8_t>(rng());
  if (symmetric) {
    // Codes near the offset, as trained weights are near zero: there a wrong offset term dwarfs the products.
    std::normal_distribution<float> near(0.0f, 2.0f);
    const int offset = 1 << (bits - 1), top = (1 << bits) - 1;
    for (int64_t i = 0; i < out * in; ++i) {
      const int q = std::clamp(offset + static_cast<int>(std::lround(near(rng))), 0, top);
      a.codes[i * bits / 8] =
          static_cast<uint8_t>((a.codes[i * bits / 8] & ~(top << (i * bits % 8))) | (q << (i * bits % 8)));
    }
  }
  std::uniform_real_distribution<float> scale(1e-3f, 2e-2f), bias(-0.1f, 0.1f);
  a.pairs.resize(out * (in / group) * 2);
  for (size_t i = 0; i < a.pairs.size(); i += 2) {
    // Scales of 8 significant bits, as the formats' 16-bit ones: scale * q is exact in f32, which decode_affine_row's
    // multiply-add (contracted or not) and the kernels' fma then both round once.
    a.pairs[i] = bf16_to_f32(f32_to_bf16(scale(rng)));
    a.pairs[i + 1] = symmetric ? -static_cast<float>(1 << (bits - 1)) * a.pairs[i] : bias(rng);
  }
  a.w.format = LinearWeight::Format::kAffine;
  a.w.weight = Tensor(a.codes.data(), DType::kU8, {out, in * bits / 8});
  a.w.scales = Tensor(a.pairs.data(), DType::kF32, {out, in / group, 2});
  a.w.out_features = out;
  a.w.in_features = in;
  a.w.scale_block_rows = 1;
  a.w.scale_block_cols = group;
  a.w.bits = bits;
  a.dequantized.resize(out * in);
  for (int64_t r = 0; r < out; ++r)
    for (int64_t i = 0; i < in; ++i) {
      const int64_t bit = i * bits;
      const uint32_t q = (a.codes[r * in * bits / 8 + bit / 8] >> (bit % 8)) & ((1u << bits) - 1);
      const float* p = &a.pairs[(r * (in / group) + i / group) * 2];
      a.dequantized[r * in + i] = p[0] * static_cast<float>(q) + p[1];
    }
  return a;
}

std::vector<float> random_x(int64_t tokens, int64_t in, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(tokens * in);
  for (auto& v : x) v = normal(rng);
  return x;
}

struct Shape {
  int bits;
  int64_t group, out, in;
  bool symmetric = false;
};

// 4-bit: groups below, at and above the 64-input chunk; 8-bit: GGUF's Q6_K (16) and Q8_0 (32) groups and MLX's. Row
// counts leave a partial 64-row panel and an odd last row.
const Shape kShapes[] = {{4, 32, 77, 256},       {4, 64, 130, 192},      {4, 128, 64, 1024},     {4, 16, 33, 128},
                         {8, 16, 77, 256},       {8, 32, 65, 96},        {8, 64, 31, 512},       {8, 128, 129, 384},
                         {8, 32, 40, 512, true}, {8, 16, 40, 256, true}, {4, 32, 40, 512, true}, {8, 32, 160, 64, true},
                         {4, 32, 96, 64},        {8, 64, 512, 64},       {8, 96, 20, 192},       {8, 256, 10, 512},
                         {4, 256, 12, 512}};

class AffineKernels : public ::testing::TestWithParam<Shape> {
 protected:
  void SetUp() override {
    if (!has_bf16_gemm()) GTEST_SKIP() << "this build has no AVX512-BF16";
  }
};

TEST_P(AffineKernels, Supported) {
  const Shape s = GetParam();
  AffineWeight a = random_affine(s.out, s.in, s.bits, s.group, 1, s.symmetric);
  EXPECT_TRUE(affine_kernel_supports(a.w));
  a.w.bits = 2;
  EXPECT_FALSE(affine_kernel_supports(a.w));
}

TEST_P(AffineKernels, GemmEqualsTheBf16GemmOverADequantizedCopy) {
  const Shape s = GetParam();
  const AffineWeight a = random_affine(s.out, s.in, s.bits, s.group, 2, s.symmetric);
  // The bf16 copy the fast path used to make: decode_affine_row, rounded, packed.
  std::vector<uint16_t> copy(s.out * s.in), packed(packed_elements(s.out, s.in));
  std::vector<float> row(s.in);
  for (int64_t r = 0; r < s.out; ++r) {
    decode_affine_row(a.w, r, row.data());
    for (int64_t i = 0; i < s.in; ++i) copy[r * s.in + i] = f32_to_bf16(row[i]);
  }
  pack_bf16_weight(copy.data(), s.out, s.in, packed.data());
  for (int64_t tokens : {1, 5, 13, 37}) {
    const std::vector<float> x = random_x(tokens, s.in, 3);
    std::vector<uint16_t> xb(x.size());
    for (size_t i = 0; i < x.size(); ++i) xb[i] = f32_to_bf16(x[i]);
    std::vector<float> want(tokens * s.out), got(tokens * s.out);
    gemm_bf16_packed(xb.data(), tokens, s.in, packed.data(), s.in, s.out, want.data(), s.out, 0, packed_panels(s.out));
    affine_gemm(x.data(), tokens, a.w, got.data(), 0, packed_panels(s.out));
    for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(got[i], want[i]) << "tokens " << tokens << " element " << i;
  }
}

TEST_P(AffineKernels, GemvIsTheExactProductUpToBf16Activations) {
  const Shape s = GetParam();
  const AffineWeight a = random_affine(s.out, s.in, s.bits, s.group, 4, s.symmetric);
  // Symmetric weights also through their scales alone (CompactScales), as prepare_linear gives them.
  std::vector<float> scales(a.pairs.size() / 2);
  for (size_t g = 0; g < scales.size(); ++g) scales[g] = a.pairs[2 * g];
  const CompactScales symmetric{scales.data(), static_cast<float>(1 << (s.bits - 1))};
  for (int64_t tokens = 1; tokens <= kAffineGemvTokens; ++tokens)
    for (const CompactScales* form : {static_cast<const CompactScales*>(nullptr), &symmetric}) {
      if (form && !s.symmetric) continue;
      const std::vector<float> x = random_x(tokens, s.in, 5 + static_cast<uint32_t>(tokens));
      std::vector<float> got(tokens * s.out);
      affine_gemv(x.data(), tokens, a.w, got.data(), 0, s.out, form);
      for (int64_t t = 0; t < tokens; ++t)
        for (int64_t r = 0; r < s.out; ++r) {
          // The GEMV computes scale * sum(q * bf16(x)) + bias * sum(bf16(x)) = sum(w * bf16(x)): its error is the
          // activations' rounding, at most 2^-9 of each |w * x|, plus f32 sums of the (larger) scale * q * x terms.
          double exact = 0.0, magnitude = 0.0, terms = 0.0;
          for (int64_t i = 0; i < s.in; ++i) {
            const double w = a.dequantized[r * s.in + i], xv = x[t * s.in + i];
            const float* p = &a.pairs[(r * (s.in / s.group) + i / s.group) * 2];
            exact += w * xv;
            magnitude += std::abs(w * xv);
            terms += std::abs((w - p[1]) * xv) + std::abs(p[1] * xv);
          }
          const double tolerance = magnitude * std::ldexp(1.0, -9) + terms * 1e-6;
          ASSERT_NEAR(got[t * s.out + r], exact, tolerance)
              << "token " << t << " row " << r << (form ? " (scales)" : "");
        }
    }
}

TEST_P(AffineKernels, ThreadedLinearMatchesTheKernelsAndIsRowInvariantWhenAsked) {
  const Shape s = GetParam();
  const AffineWeight a = random_affine(s.out, s.in, s.bits, s.group, 6, s.symmetric);
  ThreadPool pool(3);
  std::vector<float> bias(s.out);
  for (int64_t r = 0; r < s.out; ++r) bias[r] = 0.01f * static_cast<float>(r % 7);
  for (int64_t tokens : {1, 3, 9}) {
    const std::vector<float> x = random_x(tokens, s.in, 7);
    std::vector<float> single(tokens * s.out), threaded(tokens * s.out);
    if (tokens <= kAffineGemvTokens)
      affine_gemv(x.data(), tokens, a.w, single.data(), 0, s.out);
    else
      affine_gemm(x.data(), tokens, a.w, single.data(), 0, packed_panels(s.out));
    affine_linear(pool, x.data(), tokens, a.w, bias.data(), threaded.data(), s.out, false);
    for (int64_t i = 0; i < tokens * s.out; ++i) ASSERT_EQ(threaded[i], single[i] + bias[i % s.out]) << i;
    // Row-invariant: each token's output is what it gets alone.
    std::vector<float> batch(tokens * s.out), alone(s.out);
    affine_linear(pool, x.data(), tokens, a.w, nullptr, batch.data(), s.out, true);
    for (int64_t t = 0; t < tokens; ++t) {
      affine_linear(pool, x.data() + t * s.in, 1, a.w, nullptr, alone.data(), s.out, true);
      for (int64_t r = 0; r < s.out; ++r) ASSERT_EQ(batch[t * s.out + r], alone[r]) << "token " << t << " row " << r;
    }
  }
}

TEST(AffineKernelsSupport, RefusesShapesTheKernelsCannotTile) {
  if (!has_bf16_gemm()) GTEST_SKIP() << "this build has no AVX512-BF16";
  AffineWeight a = random_affine(16, 192, 8, 96, 1);
  EXPECT_TRUE(affine_kernel_supports(a.w));
  a.w.scale_block_cols = 48;  // neither holds nor lies inside a 32-input step
  EXPECT_FALSE(affine_kernel_supports(a.w));
  a.w.scale_block_cols = 96;
  a.w.bits = 4;  // 4-bit chunks are 64 inputs: a group of 96 straddles them
  EXPECT_FALSE(affine_kernel_supports(a.w));
  a.w.bits = 8;
  a.w.in_features = 0;
  EXPECT_FALSE(affine_kernel_supports(a.w));
  a.w.format = LinearWeight::Format::kFp8;
  EXPECT_FALSE(affine_kernel_supports(a.w));
}

INSTANTIATE_TEST_SUITE_P(Shapes, AffineKernels, ::testing::ValuesIn(kShapes), [](const auto& info) {
  const Shape& s = info.param;
  return fmt::format("b{}_g{}_{}x{}{}", s.bits, s.group, s.out, s.in, s.symmetric ? "_symmetric" : "");
});

}  // namespace
}  // namespace rs::cpu
