// Narrowing a fused 8-bit weight back into 4-bit row ranges: which ranges narrow, and that the parts compute what the
// wide weight computes (the GEMM bit for bit: the same bf16 values; the GEMV within its activations' rounding).
#include "backend/cpu/kernels/affine_parts.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/kernels/gemm_affine.h"
#include "backend/cpu/kernels/gemm_bf16.h"
#include "backend/cpu/kernels/kernels.h"
#include "tensor/dtype.h"

namespace rs::cpu {
namespace {

constexpr int64_t kIn = 256, kGroup = 16;

// An 8-bit weight in groups of 16 as the loader leaves a fused q|k|v of Q4_K and Q6_K parts: rows [0, 96) widened from
// 4-bit codes in groups of 32 (codes < 16, each pair repeated over two groups), [96, 160) genuinely 8-bit, and
// [160, 170) widened again but too few rows to be worth a part of their own.
struct FusedWeight {
  std::vector<uint8_t> codes;
  std::vector<float> pairs;
  LinearWeight w;
};

FusedWeight fused_weight(uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> scale(1e-3f, 2e-2f), bias(-0.1f, 0.1f);
  FusedWeight f;
  const int64_t rows = 170, groups = kIn / kGroup;
  f.codes.resize(rows * kIn);
  f.pairs.resize(rows * groups * 2);
  for (int64_t r = 0; r < rows; ++r) {
    const bool widened = r < 96 || r >= 160;
    for (int64_t i = 0; i < kIn; ++i) f.codes[r * kIn + i] = static_cast<uint8_t>(rng() % (widened ? 16 : 256));
    for (int64_t g = 0; g < groups; ++g) {
      float* p = &f.pairs[(r * groups + g) * 2];
      if (widened && g % 2 == 1) {
        p[0] = p[-2];
        p[1] = p[-1];
      } else {
        p[0] = scale(rng);
        p[1] = bias(rng);
      }
    }
  }
  f.w.format = LinearWeight::Format::kAffine;
  f.w.weight = Tensor(f.codes.data(), DType::kU8, {rows, kIn});
  f.w.scales = Tensor(f.pairs.data(), DType::kF32, {rows, groups, 2});
  f.w.out_features = rows;
  f.w.in_features = kIn;
  f.w.scale_block_rows = 1;
  f.w.scale_block_cols = kGroup;
  f.w.bits = 8;
  return f;
}

std::vector<float> random_x(int64_t tokens, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(tokens * kIn);
  for (auto& v : x) v = normal(rng);
  return x;
}

class AffineParts : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!has_bf16_gemm()) GTEST_SKIP() << "this build has no AVX512-BF16";
  }
};

TEST_F(AffineParts, NarrowsTheWidenedRangesOnly) {
  const FusedWeight f = fused_weight(1);
  std::vector<Buffer> keep;
  const std::vector<AffinePart> parts = compact_affine(f.w, keep);
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0].row_begin, 0);
  EXPECT_EQ(parts[0].rows, 96);
  EXPECT_EQ(parts[0].bits, 4);
  EXPECT_EQ(parts[0].group, 32);
  EXPECT_EQ(parts[1].row_begin, 96);
  EXPECT_EQ(parts[1].rows, 74);  // the genuine 8-bit rows and the short widened run, read in place
  EXPECT_EQ(parts[1].bits, 8);
  EXPECT_EQ(parts[1].group, 16);
  EXPECT_EQ(parts[1].codes, f.codes.data() + 96 * kIn);
  // Round trip through LinearWeight::packed.
  const Tensor packed = store_parts(parts, keep);
  ASSERT_EQ(stored_parts(packed).size(), 2u);
  EXPECT_EQ(stored_parts(packed)[0].codes, parts[0].codes);

  FusedWeight wide = fused_weight(2);
  for (int64_t r = 0; r < 96; ++r) wide.codes[r * kIn + 5] = 200;  // the first range's codes no longer fit 4 bits
  const std::vector<AffinePart> split = compact_affine(wide.w, keep);
  ASSERT_EQ(split.size(), 2u);
  EXPECT_EQ(split[0].rows, 96);
  EXPECT_EQ(split[0].bits, 8);  // its pairs still repeat: 8-bit codes in groups of 32
  EXPECT_EQ(split[0].group, 32);
  for (int64_t r = 0; r < 96; ++r) wide.pairs[(r * (kIn / kGroup) + 1) * 2] += 1.0f;
  EXPECT_TRUE(compact_affine(wide.w, keep).empty()) << "nothing left to narrow";

  FusedWeight unmerged = fused_weight(5);
  for (int64_t r = 0; r < 96; ++r) unmerged.pairs[(r * (kIn / kGroup) + 1) * 2] += 1.0f;  // 4-bit codes, own pairs
  const std::vector<AffinePart> four_bit = compact_affine(unmerged.w, keep);
  ASSERT_EQ(four_bit.size(), 2u);
  EXPECT_EQ(four_bit[0].bits, 4);
  EXPECT_EQ(four_bit[0].group, 16);

  LinearWeight four = f.w;
  four.bits = 4;
  EXPECT_TRUE(compact_affine(four, keep).empty()) << "only 8-bit weights are widened by the loader";
}

TEST_F(AffineParts, PartsComputeWhatTheWideWeightComputes) {
  const FusedWeight f = fused_weight(3);
  std::vector<Buffer> keep;
  const std::vector<AffinePart> parts = compact_affine(f.w, keep);
  ASSERT_FALSE(parts.empty());
  ThreadPool pool(2);
  std::vector<float> bias(f.w.out_features);
  for (int64_t r = 0; r < f.w.out_features; ++r) bias[r] = 0.01f * static_cast<float>(r % 5);
  for (int64_t tokens : {1, 3, 9, 37}) {
    const std::vector<float> x = random_x(tokens, 4);
    std::vector<float> wide(tokens * f.w.out_features), narrow(wide.size());
    affine_linear(pool, x.data(), tokens, f.w, bias.data(), wide.data(), f.w.out_features, false);
    affine_parts_linear(pool, x.data(), tokens, f.w, parts, bias.data(), narrow.data(), false);
    std::vector<float> row(kIn);
    for (int64_t t = 0; t < tokens; ++t)
      for (int64_t r = 0; r < f.w.out_features; ++r) {
        const size_t i = t * f.w.out_features + r;
        if (tokens > kAffineGemvTokens) {
          ASSERT_EQ(narrow[i], wide[i]) << "GEMM: token " << t << " row " << r;  // the same bf16 weight values
          continue;
        }
        // GEMV: both are sum(w * bf16(x)) in f32, summed in different orders.
        decode_affine_row(f.w, r, row.data());
        double terms = 0;
        for (int64_t k = 0; k < kIn; ++k) terms += std::abs(row[k] * x[t * kIn + k]) + std::abs(x[t * kIn + k]);
        ASSERT_NEAR(narrow[i], wide[i], terms * 1e-6) << "GEMV: token " << t << " row " << r;
      }
  }
}

// GGUF's symmetric types (Q8_0: w = d * (q - 128)) give parts of scales alone, which the GEMV reads instead of the
// pairs; one bias off the pattern keeps the pairs.
TEST_F(AffineParts, SymmetricWeightsKeepTheirScalesAlone) {
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> scale(1e-3f, 2e-2f);
  const int64_t rows = 40, groups = kIn / 32;
  std::vector<uint8_t> codes(rows * kIn);
  for (auto& c : codes) c = static_cast<uint8_t>(rng());
  std::vector<float> pairs(rows * groups * 2);
  for (int64_t g = 0; g < rows * groups; ++g) {
    pairs[2 * g] = scale(rng);
    pairs[2 * g + 1] = -128.0f * pairs[2 * g];
  }
  LinearWeight w;
  w.format = LinearWeight::Format::kAffine;
  w.weight = Tensor(codes.data(), DType::kU8, {rows, kIn});
  w.scales = Tensor(pairs.data(), DType::kF32, {rows, groups, 2});
  w.out_features = rows;
  w.in_features = kIn;
  w.scale_block_rows = 1;
  w.scale_block_cols = 32;
  w.bits = 8;
  std::vector<Buffer> keep;
  const std::vector<AffinePart> parts = compact_affine(w, keep);
  ASSERT_EQ(parts.size(), 1u);
  EXPECT_EQ(parts[0].zero, 128.0f);
  ASSERT_NE(parts[0].scales, nullptr);
  EXPECT_EQ(parts[0].scales[5], pairs[10]);
  ThreadPool pool(2);
  for (int64_t tokens : {1, 4, 9}) {
    const std::vector<float> x = random_x(tokens, 10);
    std::vector<float> with_pairs(tokens * rows), with_scales(tokens * rows);
    affine_linear(pool, x.data(), tokens, w, nullptr, with_pairs.data(), rows, false);
    affine_parts_linear(pool, x.data(), tokens, w, parts, nullptr, with_scales.data(), false);
    for (size_t i = 0; i < with_pairs.size(); ++i) {
      double terms = 0;  // the f32 sums' scale: |scale * q * x| + |bias * x| over the row
      const int64_t t = static_cast<int64_t>(i) / rows, r = static_cast<int64_t>(i) % rows;
      for (int64_t k = 0; k < kIn; ++k) {
        const float* p = &pairs[(r * groups + k / 32) * 2];
        terms += (std::abs(p[0] * codes[r * kIn + k]) + std::abs(p[1])) * std::abs(x[t * kIn + k]);
      }
      ASSERT_NEAR(with_scales[i], with_pairs[i], terms * 1e-6) << "tokens " << tokens << " element " << i;
    }
  }
  pairs[2 * 7 + 1] += 1e-3f;
  EXPECT_TRUE(compact_affine(w, keep).empty()) << "a bias off -128 x its scale";
}

// GGUF's K-quants (Q4_K: scale = d * sc, bias = -dmin * m, d and dmin per 256 inputs, sc and m 6-bit per group of 32)
// give parts of levels and super-scales, which reproduce every pair exactly and which the GEMV reads instead.
TEST_F(AffineParts, KQuantScalesFactorIntoTwoLevels) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> factor(1e-4f, 1e-3f);
  const int64_t rows = 24, in = 512, group = 32, groups = in / group;
  std::vector<uint8_t> codes(rows * in / 2);
  for (auto& c : codes) c = static_cast<uint8_t>(rng());
  std::vector<float> pairs(rows * groups * 2);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t sb = 0; sb < in / 256; ++sb) {
      const float d = bf16_to_f32(f32_to_bf16(factor(rng))), dmin = bf16_to_f32(f32_to_bf16(factor(rng)));
      for (int64_t g = sb * 8; g < (sb + 1) * 8; ++g) {
        pairs[(r * groups + g) * 2] = d * static_cast<float>(rng() % 64);
        pairs[(r * groups + g) * 2 + 1] = -dmin * static_cast<float>(rng() % 64);
      }
    }
  LinearWeight w;
  w.format = LinearWeight::Format::kAffine;
  w.weight = Tensor(codes.data(), DType::kU8, {rows, in / 2});
  w.scales = Tensor(pairs.data(), DType::kF32, {rows, groups, 2});
  w.out_features = rows;
  w.in_features = in;
  w.scale_block_rows = 1;
  w.scale_block_cols = group;
  w.bits = 4;
  std::vector<Buffer> keep;
  const std::vector<AffinePart> parts = compact_affine(w, keep);
  ASSERT_EQ(parts.size(), 1u);
  ASSERT_NE(parts[0].levels, nullptr);
  EXPECT_EQ(parts[0].scales, nullptr);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t g = 0; g < groups; ++g) {
      const float* sup = parts[0].supers + (r * (in / 256) + g / 8) * 2;
      const uint8_t* lev = parts[0].levels + (r * groups + g) * 2;
      ASSERT_EQ(sup[0] * static_cast<float>(lev[0]), pairs[(r * groups + g) * 2]) << r << " " << g;
      ASSERT_EQ(sup[1] * static_cast<float>(lev[1]), pairs[(r * groups + g) * 2 + 1]) << r << " " << g;
    }
  ThreadPool pool(2);
  for (int64_t tokens : {1, 3, 6}) {
    std::mt19937 xr(12);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> x(tokens * in);
    for (auto& v : x) v = normal(xr);
    std::vector<float> with_pairs(tokens * rows), with_levels(tokens * rows), row(in);
    affine_linear(pool, x.data(), tokens, w, nullptr, with_pairs.data(), rows, false);
    affine_parts_linear(pool, x.data(), tokens, w, parts, nullptr, with_levels.data(), false);
    for (size_t i = 0; i < with_pairs.size(); ++i) {
      const int64_t t = static_cast<int64_t>(i) / rows, r = static_cast<int64_t>(i) % rows;
      decode_affine_row(w, r, row.data());
      double terms = 0;
      for (int64_t k = 0; k < in; ++k) terms += (std::abs(row[k]) + 0.1) * std::abs(x[t * in + k]);
      ASSERT_NEAR(with_levels[i], with_pairs[i], terms * 1e-6) << "tokens " << tokens << " element " << i;
    }
  }
  pairs[3 * 2] *= 1.0f + 1e-6f;  // one scale no longer a multiple of its superblock's factor
  EXPECT_TRUE(compact_affine(w, keep).empty());
}

// Through the backend: prepare_linear keeps the narrowed parts and (memory allowing) a bf16 copy; linear() runs the
// GEMV on the parts for small steps and the copy for large ones. Without the copy (a model past the budget) large
// steps decode the parts per call: the same bits. Without the parts, the wide weight: the same values.
TEST_F(AffineParts, BackendLinearGivesTheSameResultsWithOrWithoutTheCopyAndTheParts) {
  const FusedWeight f = fused_weight(7);
  auto backend = make_backend("cpu", BackendOptions{.num_threads = 2, .exact_f32 = false});
  LinearWeight prepared = f.w;
  std::vector<Buffer> keep;
  backend->prepare_linear(prepared, keep);
  ASSERT_FALSE(prepared.packed_rows.empty()) << "the widened rows were not narrowed";
  ASSERT_FALSE(prepared.packed.empty()) << "no bf16 copy for a weight of 43 KiB";
  LinearWeight no_copy = prepared;
  no_copy.packed = Tensor();
  const LinearWeight& wide = f.w;  // neither
  const int64_t out = f.w.out_features;
  for (int64_t tokens : {1, 3, 6, 9, 37}) {
    const std::vector<float> x = random_x(tokens, 8);
    const Tensor xt(const_cast<float*>(x.data()), DType::kF32, {tokens, kIn});
    std::vector<float> a(tokens * out), b(a.size()), c(a.size());
    backend->linear(xt, prepared, Tensor(), Tensor(a.data(), DType::kF32, {tokens, out}));
    backend->linear(xt, no_copy, Tensor(), Tensor(b.data(), DType::kF32, {tokens, out}));
    backend->linear(xt, wide, Tensor(), Tensor(c.data(), DType::kF32, {tokens, out}));
    std::vector<float> row(kIn);
    for (size_t i = 0; i < a.size(); ++i) {
      if (tokens > kAffineGemvTokens) {  // every path is the bf16 GEMM over the same values
        ASSERT_EQ(b[i], a[i]) << "tokens " << tokens << " element " << i;
        ASSERT_EQ(c[i], a[i]) << "tokens " << tokens << " element " << i;
        continue;
      }
      // GEMVs (bf16 activations, exact weights) and at 5-8 rows the copy's GEMM (bf16 weights too): each within
      // bf16's rounding of every product, 2^-8 of sum |w x| between two of them.
      const int64_t t = static_cast<int64_t>(i) / out, r = static_cast<int64_t>(i) % out;
      decode_affine_row(f.w, r, row.data());
      double magnitude = 0;
      for (int64_t k = 0; k < kIn; ++k) magnitude += std::abs(row[k] * x[t * kIn + k]);
      ASSERT_NEAR(b[i], a[i], magnitude * std::ldexp(1.0, -8)) << "tokens " << tokens << " element " << i;
      ASSERT_NEAR(c[i], a[i], magnitude * std::ldexp(1.0, -8)) << "tokens " << tokens << " element " << i;
    }
  }
}

}  // namespace
}  // namespace rs::cpu
