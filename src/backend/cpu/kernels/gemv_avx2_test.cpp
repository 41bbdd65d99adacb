// The AVX2 GEMVs (kernels/gemv_avx2.h) against f64 dot products of the exactly widened weights (bf16 values, or scale
// x q + bias of the integer codes): only the order of their f32 sums may differ. Runs wherever the CPU has AVX2 and
// FMA, whatever kernels the build otherwise uses. The dispatch through cpu::linear is checked under
// RS_CPU_KERNELS=avx2 by the model tests' CTest entries that set it.
#include "backend/cpu/kernels/gemv_avx2.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backend/cpu/kernels/gemm_bf16.h"
#include "tensor/dtype.h"

namespace rs::cpu {
namespace {

constexpr int kFp8 = 80;

struct Case {
  int bits;  // 16: bf16 dense; 4 or 8: integer codes; 0: MXFP4 (blocks of 32); kFp8: FP8 blocks of `group`
  int64_t group, out, in;
};

struct Weight {
  std::vector<uint8_t> codes, exponents;
  std::vector<uint16_t> bf16;
  std::vector<float> pairs;
  std::vector<double> values;  // [out, in], exact
  LinearWeight w;
};

Weight make_weight(const Case& c, uint32_t seed) {
  std::mt19937 rng(seed);
  Weight a;
  a.values.resize(c.out * c.in);
  a.w.out_features = c.out;
  a.w.in_features = c.in;
  if (c.bits == 16) {
    std::normal_distribution<float> normal(0.0f, 0.05f);
    a.bf16.resize(c.out * c.in);
    for (size_t i = 0; i < a.bf16.size(); ++i) {
      a.bf16[i] = f32_to_bf16(normal(rng));
      a.values[i] = bf16_to_f32(a.bf16[i]);
    }
    a.w.weight = Tensor(a.bf16.data(), DType::kBF16, {c.out, c.in});
    return a;
  }
  if (c.bits == kFp8) {  // E4M3 codes (no NaN) x an f32 scale per group x group block (group >= in: per channel)
    const int64_t block_cols = c.group, block_rows = c.group >= c.in ? 1 : c.group;
    const int64_t scale_cols = (c.in + block_cols - 1) / block_cols, scale_rows = (c.out + block_rows - 1) / block_rows;
    a.codes.resize(c.out * c.in);
    for (auto& b : a.codes) b = static_cast<uint8_t>(rng() % 127 + (rng() % 2) * 128);
    std::uniform_real_distribution<float> scale(1e-3f, 2e-2f);
    a.pairs.resize(scale_rows * scale_cols);
    for (auto& v : a.pairs) v = scale(rng);
    for (int64_t r = 0; r < c.out; ++r)
      for (int64_t i = 0; i < c.in; ++i)
        a.values[r * c.in + i] = static_cast<double>(fp8_e4m3_to_f32(a.codes[r * c.in + i])) *
                                 a.pairs[(r / block_rows) * scale_cols + i / block_cols];
    a.w.format = LinearWeight::Format::kFp8;
    a.w.weight = Tensor(a.codes.data(), DType::kF8E4M3, {c.out, c.in});
    a.w.scales = Tensor(a.pairs.data(), DType::kF32, {scale_rows, scale_cols});
    a.w.scale_block_rows = block_rows;
    a.w.scale_block_cols = block_cols;
    return a;
  }
  if (c.bits == 0) {  // MXFP4: 16 bytes of E2M1 pairs and one E8M0 exponent per 32 inputs
    static constexpr float kE2m1[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};
    a.codes.resize(c.out * c.in / 2);
    for (auto& b : a.codes) b = static_cast<uint8_t>(rng());
    a.exponents.resize(c.out * c.in / 32);
    for (auto& e : a.exponents) e = static_cast<uint8_t>(118 + rng() % 12);
    for (int64_t r = 0; r < c.out; ++r)
      for (int64_t i = 0; i < c.in; ++i) {
        const uint8_t byte = a.codes[r * c.in / 2 + i / 2];
        a.values[r * c.in + i] =
            std::ldexp(kE2m1[i % 2 ? byte >> 4 : byte & 15], a.exponents[r * c.in / 32 + i / 32] - 127);
      }
    a.w.format = LinearWeight::Format::kMxfp4;
    a.w.weight = Tensor(a.codes.data(), DType::kU8, {c.out, c.in / 32, 16});
    a.w.scales = Tensor(a.exponents.data(), DType::kU8, {c.out, c.in / 32});
    return a;
  }
  a.codes.resize(c.out * c.in * c.bits / 8);
  for (auto& b : a.codes) b = static_cast<uint8_t>(rng());
  std::uniform_real_distribution<float> scale(1e-3f, 2e-2f), bias(-0.1f, 0.1f);
  const int64_t groups = c.in / c.group;
  a.pairs.resize(c.out * groups * 2);
  // Scales of 8 significant bits, as the formats' 16-bit ones.
  for (size_t i = 0; i < a.pairs.size(); i += 2)
    a.pairs[i] = bf16_to_f32(f32_to_bf16(scale(rng))), a.pairs[i + 1] = bias(rng);
  for (int64_t r = 0; r < c.out; ++r)
    for (int64_t i = 0; i < c.in; ++i) {
      const int64_t bit = i * c.bits;
      const uint32_t q = (a.codes[r * c.in * c.bits / 8 + bit / 8] >> (bit % 8)) & ((1u << c.bits) - 1);
      const float* p = &a.pairs[(r * groups + i / c.group) * 2];
      a.values[r * c.in + i] = static_cast<double>(p[0]) * q + p[1];
    }
  a.w.format = LinearWeight::Format::kAffine;
  a.w.weight = Tensor(a.codes.data(), DType::kU8, {c.out, c.in * c.bits / 8});
  a.w.scales = Tensor(a.pairs.data(), DType::kF32, {c.out, groups, 2});
  a.w.scale_block_rows = 1;
  a.w.scale_block_cols = c.group;
  a.w.bits = c.bits;
  return a;
}

class Avx2Gemv : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    if (!cpu_has_avx2_fma()) GTEST_SKIP() << "this CPU has no AVX2/FMA";
  }
};

TEST_P(Avx2Gemv, MatchesTheExactProductOverARowRange) {
  const Case c = GetParam();
  const Weight a = make_weight(c, 7 + c.bits + static_cast<uint32_t>(c.group));
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int64_t tokens = 1; tokens <= kAvx2GemvTokens; ++tokens) {
    std::vector<float> x(tokens * c.in);
    for (auto& v : x) v = normal(rng);
    // A row range that starts off the kernel's two-row blocks and leaves an odd last row; rows outside stay untouched.
    const int64_t begin = 3, end = c.out - 2, stride = c.out + 5;
    constexpr float kUntouched = 12345.0f;
    std::vector<float> out(tokens * stride, kUntouched);
    avx2_gemv(x.data(), tokens, a.w, out.data(), stride, begin, end);
    for (int64_t t = 0; t < tokens; ++t)
      for (int64_t r = 0; r < stride; ++r) {
        const float got = out[t * stride + r];
        if (r < begin || r >= end) {
          ASSERT_EQ(got, kUntouched) << fmt::format("row {} outside [{}, {}) was written", r, begin, end);
          continue;
        }
        double want = 0.0, magnitude = 0.0;
        for (int64_t i = 0; i < c.in; ++i) {
          want += a.values[r * c.in + i] * x[t * c.in + i];
          magnitude += std::abs(a.values[r * c.in + i] * x[t * c.in + i]);
        }
        // f32 sums of `in` products (and of the group sums times the biases): a few units of f32 rounding per term.
        ASSERT_NEAR(got, want, 4e-7 * magnitude * std::sqrt(static_cast<double>(c.in)) + 1e-6) << fmt::format(
            "bits {} group {} [{} x {}] token {} of {} row {}", c.bits, c.group, c.out, c.in, t, tokens, r);
      }
  }
}

// Prefill panels' row decodes (integer codes and MXFP4; bf16 and FP8 rows keep their own widening).
class Avx2RowDecode : public Avx2Gemv {};

TEST_P(Avx2RowDecode, DecodedRowsAreTheExactValuesBitForBit) {
  const Case c = GetParam();
  const Weight a = make_weight(c, 5);
  std::vector<float> row(c.in);
  if (c.bits == 0) {  // MXFP4: the exact values
    for (int64_t r = 0; r < c.out; ++r) {
      ASSERT_TRUE(avx2_decode_mxfp4_row(a.w, r, row.data()));
      for (int64_t i = 0; i < c.in; ++i)
        ASSERT_EQ(row[i], static_cast<float>(a.values[r * c.in + i])) << fmt::format("row {} input {}", r, i);
    }
    return;
  }
  for (int64_t r = 0; r < c.out; ++r) {
    ASSERT_TRUE(avx2_decode_affine_row(a.w, r, row.data()));
    for (int64_t i = 0; i < c.in; ++i) {
      // The scales have 8 significant bits (as the formats' 16-bit ones), so scale x q is exact and fma's one
      // rounding is also decode_affine_row's multiply-then-add.
      const int64_t bit = i * c.bits;
      const uint32_t q = (a.codes[r * c.in * c.bits / 8 + bit / 8] >> (bit % 8)) & ((1u << c.bits) - 1);
      const float* p = &a.pairs[(r * (c.in / c.group) + i / c.group) * 2];
      ASSERT_EQ(row[i], std::fma(p[0], static_cast<float>(q), p[1])) << fmt::format("row {} input {}", r, i);
    }
  }
}

// bf16 rows of a multiple of 8 inputs; codes in groups of 16 (GGUF Q6_K widened to 8 bits), 32, 64 and 128; MXFP4
// (2,880: gpt-oss's hidden size); FP8 in 32 x 32 and 128 x 128 blocks and per channel.
INSTANTIATE_TEST_SUITE_P(Shapes, Avx2Gemv,
                         ::testing::Values(Case{16, 0, 37, 200}, Case{16, 0, 64, 1024}, Case{4, 32, 41, 256},
                                           Case{4, 64, 38, 384}, Case{4, 128, 9, 1024}, Case{4, 16, 12, 128},
                                           Case{8, 16, 21, 256}, Case{8, 32, 40, 96}, Case{8, 128, 7, 512},
                                           Case{0, 32, 19, 256}, Case{0, 32, 36, 2880}, Case{kFp8, 32, 70, 96},
                                           Case{kFp8, 128, 9, 256}, Case{kFp8, 200, 13, 200}),
                         [](const auto& info) {
                           const Case& c = info.param;
                           return fmt::format("bits{}_group{}_{}x{}", c.bits, c.group, c.out, c.in);
                         });

INSTANTIATE_TEST_SUITE_P(Shapes, Avx2RowDecode,
                         ::testing::Values(Case{4, 32, 41, 256}, Case{4, 64, 38, 384}, Case{4, 16, 12, 128},
                                           Case{8, 16, 21, 256}, Case{8, 128, 7, 512}, Case{0, 32, 19, 256},
                                           Case{0, 32, 36, 2880}),
                         [](const auto& info) {
                           const Case& c = info.param;
                           return fmt::format("bits{}_group{}_{}x{}", c.bits, c.group, c.out, c.in);
                         });

TEST(Avx2GemvSupports, OnlyWhatTheKernelReads) {
  Weight bf16 = make_weight({16, 0, 4, 64}, 1);
  Weight int4 = make_weight({4, 32, 4, 64}, 2);
  Weight int8_group8 = make_weight({8, 8, 4, 64}, 3);
  const bool active = cpu_has_avx2_fma() && !has_bf16_gemm();
#if defined(__AVX512F__)
  const bool bf16_active = active && avx2_kernels_forced();  // else gemm.cpp's AVX-512F GEMV
#else
  const bool bf16_active = active;
#endif
  EXPECT_EQ(avx2_gemv_supports(bf16.w), bf16_active);
  EXPECT_EQ(avx2_gemv_supports(int4.w), active);
  EXPECT_FALSE(avx2_gemv_supports(int8_group8.w));  // groups of 8 are not a multiple of 16
  int4.w.bits = 2;
  EXPECT_FALSE(avx2_gemv_supports(int4.w));
  std::vector<float> f32(4 * 64);
  LinearWeight dense_f32{.weight = Tensor(f32.data(), DType::kF32, {4, 64}), .out_features = 4, .in_features = 64};
  EXPECT_FALSE(avx2_gemv_supports(dense_f32));  // OpenBLAS's
}

}  // namespace
}  // namespace rs::cpu
