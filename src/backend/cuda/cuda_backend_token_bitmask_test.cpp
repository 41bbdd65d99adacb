// Parity of CUDA's token bitmask (structured output) with the CPU reference: the same logits exactly (masked ones
// -inf, the rest untouched) on rows with dense, sparse, empty and full masks, at vocabularies that are and are not a
// multiple of 32.
#include "backend/cuda/parity_test_util.h"

namespace rs::cuda_test {
namespace {

std::vector<uint32_t> random_bitmask(std::mt19937& rng, int32_t rows, int32_t words) {
  std::vector<uint32_t> bits(static_cast<size_t>(rows) * words);
  for (int32_t r = 0; r < rows; ++r) {
    for (int32_t w = 0; w < words; ++w) {
      uint32_t& word = bits[static_cast<size_t>(r) * words + w];
      switch (r % 4) {
        case 0: word = rng(); break;                                     // dense
        case 1: word = rng() % 50 == 0 ? 1u << (rng() % 32) : 0; break;  // a few allowed tokens
        case 2: word = 0xFFFFFFFFu; break;                               // unconstrained row
        default: word = rng() % 2 ? 0xFFFFFFFFu : 0u; break;             // whole words in or out
      }
    }
  }
  return bits;
}

TEST_F(CudaParity, TokenBitmaskMatchesCpu) {
  for (const int32_t vocab : {1000, 151936, 151941}) {
    const int32_t rows = 9, words = (vocab + 31) / 32;
    const std::vector<float> logits = normal(rng_, static_cast<size_t>(rows) * vocab, 3.0f);
    const std::vector<uint32_t> bits = random_bitmask(rng_, rows, words);
    Tensor ref = host(logits, DType::kF32, {rows, vocab});
    cpu_->apply_token_bitmask(ref, host(bits, DType::kU32, {rows, words}));
    Tensor got = dev(host(logits, DType::kF32, {rows, vocab}));
    gpu_->apply_token_bitmask(got, dev(host(bits, DType::kU32, {rows, words})));
    const std::vector<float> out = fetch<float>(got);
    const std::vector<float> expected = as_floats(ref);
    int64_t masked = 0;
    for (size_t i = 0; i < expected.size(); ++i) {
      ASSERT_EQ(std::memcmp(&out[i], &expected[i], sizeof(float)), 0) << "vocab " << vocab << " index " << i;
      masked += std::isinf(expected[i]);
    }
    EXPECT_GT(masked, 0);
    EXPECT_LT(masked, static_cast<int64_t>(expected.size()));
  }
}

}  // namespace
}  // namespace rs::cuda_test
