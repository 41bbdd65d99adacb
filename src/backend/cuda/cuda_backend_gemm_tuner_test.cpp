// The fast path's bf16 GEMMs through GemmTuner (cuBLASLt, algorithms timed once per shape): every row count of a
// shape's bucket computes the product, a repeated call gives the same bits (the kept algorithm), and a shape first
// met while a CUDA graph records (cublasGemmEx, untimed) replays correctly and is timed at its next eager call.
#include "backend/cuda/parity_test_util.h"

namespace rs::cuda_test {
namespace {

// Products of bf16 values are exact in f32, so against the exact backend's GEMM on the same values (hi = x, lo = 0)
// only the order of the f32 sums differs.
constexpr double kTunedGemm = 1e-5;

class GemmTuning : public CudaParity {
 protected:
  LinearWeight weight(int64_t out, int64_t in) {
    const Tensor w = host(to_bf16(normal(rng_, out * in, 1.0f / std::sqrt(float(in)))), DType::kBF16, {out, in});
    return dev_weight(LinearWeight{LinearWeight::Format::kDense, w, Tensor(), out, in});
  }
  // x [rows, in] as bf16 on the device and the same values as f32 (for the exact backend).
  std::pair<Tensor, Tensor> rows(int64_t tokens, int64_t in) {
    const std::vector<uint16_t> bits = to_bf16(normal(rng_, tokens * in));
    std::vector<float> values(bits.size());
    for (size_t i = 0; i < bits.size(); ++i) {
      const uint32_t word = uint32_t{bits[i]} << 16;
      std::memcpy(&values[i], &word, sizeof(word));
    }
    return {dev(host(bits, DType::kBF16, {tokens, in})), dev(host(values, DType::kF32, {tokens, in}))};
  }
  Tensor zeros(int64_t tokens, int64_t out) { return dev(host_zeros(DType::kF32, {tokens, out})); }
};

TEST_F(GemmTuning, EveryRowCountOfABucketComputesTheProduct) {
  // n <= 256 is keyed exactly; 257-512 share the 512 bucket and 513-1024 the 1024 one, timed at their first n.
  for (const auto& [out_features, in] :
       {std::pair<int64_t, int64_t>{1000, 768}, std::pair<int64_t, int64_t>{4096, 1024}})
    for (int64_t tokens : {3, 17, 256, 300, 257, 512, 700, 1000, 513}) {
      const std::string what = fmt::format("[{}x{}] T={}", out_features, in, tokens);
      const LinearWeight w = weight(out_features, in);
      const auto [x_bf16, x_f32] = rows(tokens, in);
      Tensor ref = zeros(tokens, out_features), got = zeros(tokens, out_features), again = zeros(tokens, out_features);
      gpu_->linear(x_f32, w, Tensor(), ref);
      gpu_->synchronize();
      fast_->linear(x_bf16, w, Tensor(), got);
      fast_->linear(x_bf16, w, Tensor(), again);
      fast_->synchronize();
      EXPECT_PARITY(fetch<float>(got), fetch<float>(ref), kTunedGemm, what);
      EXPECT_EQ(fetch<float>(again), fetch<float>(got)) << what << ": the kept algorithm gives the same bits";
    }
}

TEST_F(GemmTuning, AShapeFirstMetWhileCapturingReplaysAndIsTimedLater) {
  ASSERT_TRUE(fast_->supports_graphs());
  const int64_t tokens = 40, in = 384, out_features = 640;  // a shape no other test uses
  const LinearWeight w = weight(out_features, in);
  const auto [x_bf16, x_f32] = rows(tokens, in);
  Tensor ref = zeros(tokens, out_features), replayed = zeros(tokens, out_features), eager = zeros(tokens, out_features);
  gpu_->linear(x_f32, w, Tensor(), ref);
  gpu_->synchronize();
  const std::unique_ptr<BackendGraph> graph = fast_->capture([&] { fast_->linear(x_bf16, w, Tensor(), replayed); });
  ASSERT_NE(graph, nullptr);
  graph->replay();
  fast_->synchronize();
  EXPECT_PARITY(fetch<float>(replayed), fetch<float>(ref), kTunedGemm, "recorded before any eager call");
  fast_->linear(x_bf16, w, Tensor(), eager);  // times the shape now
  fast_->synchronize();
  EXPECT_PARITY(fetch<float>(eager), fetch<float>(ref), kTunedGemm, "eager, after timing");
  fast_->copy(replayed, host_zeros(DType::kF32, {tokens, out_features}));  // so the replay below must rewrite it
  fast_->synchronize();
  graph->replay();  // the recorded launch is unchanged by the later choice
  fast_->synchronize();
  EXPECT_PARITY(fetch<float>(replayed), fetch<float>(ref), kTunedGemm, "replayed again");
}

}  // namespace
}  // namespace rs::cuda_test
