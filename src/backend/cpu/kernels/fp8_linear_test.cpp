// FP8 linears on the CPU backend against naive products over the longhand-dequantized weight: exact mode decodes
// E4M3 codes times their block scales (per block, per channel and per tensor), the fast path runs them through the
// bf16 kernels within bf16's rounding.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/kernels/kernels.h"

namespace rs::cpu {
namespace {

struct Fp8Weight {
  std::vector<uint8_t> codes;
  std::vector<float> scales;
  LinearWeight w;
  std::vector<float> dequantized;  // longhand: value(code) * scale
};

// E4M3 by its definition, independent of dtype.cpp: (-1)^s * 2^(e-7) * (1 + m/8), subnormals 2^-6 * m/8.
float e4m3(uint8_t code) {
  const int e = (code >> 3) & 15, m = code & 7;
  const double v = e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1.0 + m / 8.0, e - 7);
  return static_cast<float>(code & 0x80 ? -v : v);
}

Fp8Weight random_fp8(int64_t out, int64_t in, int64_t block_rows, int64_t block_cols, uint32_t seed) {
  std::mt19937 rng(seed);
  Fp8Weight f;
  f.codes.resize(out * in);
  for (auto& c : f.codes) {
    do c = static_cast<uint8_t>(rng());
    while ((c & 0x7f) == 0x7f);  // no NaN codes
  }
  const int64_t rows = (out + block_rows - 1) / block_rows, cols = (in + block_cols - 1) / block_cols;
  std::uniform_real_distribution<float> scale(1e-4f, 1e-2f);
  f.scales.resize(rows * cols);
  for (auto& s : f.scales) s = scale(rng);
  f.w = LinearWeight{LinearWeight::Format::kFp8, Tensor(f.codes.data(), DType::kF8E4M3, {out, in}),
                     Tensor(f.scales.data(), DType::kF32, {rows, cols}), out, in};
  f.w.scale_block_rows = block_rows;
  f.w.scale_block_cols = block_cols;
  f.dequantized.resize(out * in);
  for (int64_t o = 0; o < out; ++o)
    for (int64_t i = 0; i < in; ++i)
      f.dequantized[o * in + i] = e4m3(f.codes[o * in + i]) * f.scales[(o / block_rows) * cols + i / block_cols];
  return f;
}

std::vector<float> random_x(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist;
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

TEST(CpuFp8, DecodesRowsExactly) {
  for (int code = 0; code < 256; ++code) {
    if ((code & 0x7f) != 0x7f) {
      ASSERT_EQ(fp8_e4m3_to_f32(static_cast<uint8_t>(code)), e4m3(static_cast<uint8_t>(code))) << code;
    }
  }
  const Fp8Weight f = random_fp8(70, 96, 32, 32, 7);  // partial blocks in both directions
  std::vector<float> row(96);
  for (int64_t r = 0; r < 70; ++r) {
    decode_fp8_row(f.w, r, row.data());
    for (int64_t i = 0; i < 96; ++i) ASSERT_EQ(row[i], f.dequantized[r * 96 + i]) << r << "," << i;
  }
}

TEST(CpuFp8, LinearMatchesTheDequantizedWeight) {
  struct Layout {
    int64_t out, in, block_rows, block_cols;
  };
  // 128x128 blocks with partial edges, per channel, per tensor.
  for (const Layout l : {Layout{300, 256, 128, 128}, Layout{37, 96, 1, 96}, Layout{64, 48, 64, 48}}) {
    const Fp8Weight f = random_fp8(l.out, l.in, l.block_rows, l.block_cols, 11);
    for (bool fast : {false, true}) {
      auto backend = make_backend("cpu", BackendOptions{.num_threads = 2, .exact_f32 = !fast});
      LinearWeight w = f.w;
      std::vector<Buffer> keep;
      backend->prepare_linear(w, keep);
      for (int64_t tokens : {1, 3, 9, 40}) {
        const auto x = random_x(tokens * l.in, 5);
        std::vector<float> got(tokens * l.out);
        backend->linear(Tensor(const_cast<float*>(x.data()), DType::kF32, {tokens, l.in}), w, Tensor(),
                        Tensor(got.data(), DType::kF32, {tokens, l.out}));
        double max_err = 0, max_ref = 0;
        for (int64_t t = 0; t < tokens; ++t)
          for (int64_t o = 0; o < l.out; ++o) {
            double ref = 0;
            for (int64_t i = 0; i < l.in; ++i) ref += double(x[t * l.in + i]) * f.dequantized[o * l.in + i];
            max_err = std::max(max_err, std::abs(got[t * l.out + o] - ref));
            max_ref = std::max(max_ref, std::abs(ref));
          }
        // Exact: f32 sums of exact products. Fast (with AVX512-BF16): weights and activations rounded to bf16.
        EXPECT_LT(max_err / max_ref, fast ? 1e-2 : 1e-5)
            << l.out << "x" << l.in << " blocks " << l.block_rows << "x" << l.block_cols << " T=" << tokens
            << (fast ? " fast" : " exact");
      }
    }
  }
}

}  // namespace
}  // namespace rs::cpu
