// Deterministic inference (row_invariant): a row's result must not depend on how many rows share the call, for every
// weight format and activation mode, bit for bit.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/kernels/gemm_bf16.h"
#include "backend/cpu/kernels/kernels.h"

namespace rs::cpu {
namespace {

std::vector<float> random_vector(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

struct Case {
  const char* name;
  LinearWeight weight;
  bool bf16_activations;
};

// Every row of a T-row call equals the same row computed alone (T = 1), exactly.
void expect_row_invariant(ThreadPool& pool, const Case& c) {
  const int64_t in = c.weight.in_features, out = c.weight.out_features;
  const auto bias = random_vector(out, 3);
  for (int64_t tokens : {2, 3, 4, 5, 7, 13, 40}) {
    const auto x = random_vector(tokens * in, 100 + static_cast<uint32_t>(tokens));
    std::vector<float> batched(tokens * out);
    linear(pool, Tensor(const_cast<float*>(x.data()), DType::kF32, {tokens, in}), c.weight,
           Tensor(const_cast<float*>(bias.data()), DType::kF32, {out}),
           Tensor(batched.data(), DType::kF32, {tokens, out}), c.bf16_activations, /*row_invariant=*/true);
    for (int64_t t = 0; t < tokens; ++t) {
      std::vector<float> alone(out);
      linear(pool, Tensor(const_cast<float*>(x.data() + t * in), DType::kF32, {1, in}), c.weight,
             Tensor(const_cast<float*>(bias.data()), DType::kF32, {out}), Tensor(alone.data(), DType::kF32, {1, out}),
             c.bf16_activations, /*row_invariant=*/true);
      ASSERT_EQ(std::memcmp(alone.data(), batched.data() + t * out, out * sizeof(float)), 0)
          << c.name << ": row " << t << " of " << tokens << " differs from the row alone";
    }
  }
}

TEST(CpuBatchInvariance, LinearRowsDoNotDependOnTheirBatch) {
  ThreadPool pool(2);
  const int64_t in = 136, out = 72;  // past one 64-column panel, inputs off the 32-wide vector
  auto w32 = random_vector(in * out, 1);
  std::vector<uint16_t> w16(w32.size());
  for (size_t i = 0; i < w32.size(); ++i) w16[i] = f32_to_bf16(w32[i]);
  std::vector<uint16_t> packed(packed_elements(out, in));
  pack_bf16_weight(w16.data(), out, in, packed.data());
  std::vector<uint8_t> blocks(out * in / 2), scales(out * in / 32);
  std::mt19937 rng(2);
  for (auto& b : blocks) b = static_cast<uint8_t>(rng());
  for (auto& s : scales) s = static_cast<uint8_t>(120 + rng() % 10);
  const int64_t mx_in = in / 32 * 32;  // MXFP4 rows are whole 32-blocks
  const LinearWeight f32{LinearWeight::Format::kDense, Tensor(w32.data(), DType::kF32, {out, in}), Tensor(), out, in};
  const LinearWeight bf16{LinearWeight::Format::kDense, Tensor(w16.data(), DType::kBF16, {out, in}), Tensor(), out, in};
  const LinearWeight bf16_packed{LinearWeight::Format::kDense,
                                 Tensor(w16.data(), DType::kBF16, {out, in}),
                                 Tensor(),
                                 out,
                                 in,
                                 Tensor(packed.data(), DType::kBF16, {static_cast<int64_t>(packed.size())})};
  const LinearWeight mxfp4{LinearWeight::Format::kMxfp4, Tensor(blocks.data(), DType::kU8, {out, mx_in / 32, 16}),
                           Tensor(scales.data(), DType::kU8, {out, mx_in / 32}), out, mx_in};
  std::vector<Case> cases = {{"f32", f32, false},
                             {"bf16, f32 activations", bf16, false},
                             {"bf16, bf16 activations", bf16, true},
                             {"mxfp4", mxfp4, false},
                             {"mxfp4, bf16 activations", mxfp4, true}};
  if (has_bf16_gemm()) cases.push_back({"bf16 packed", bf16_packed, true});
  for (const Case& c : cases) expect_row_invariant(pool, c);
}

}  // namespace
}  // namespace rs::cpu
