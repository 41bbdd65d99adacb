// GEMM inputs in bf16 on the fast path (Backend::linear_input_dtype): the producers (rms_norm, add_rms_norm, silu_mul)
// write bf16 that equals their f32 result rounded to nearest even, bit for bit, and a linear on those bf16 rows equals
// the same linear on the f32 rows, bit for bit: the split pass it saves rounded them the same way. So a model that
// keeps its GEMM inputs in bf16 computes exactly what it computed with f32 inputs.
#include "backend/cuda/parity_test_util.h"

namespace rs::cuda_test {
namespace {

std::vector<uint16_t> rounded(const std::vector<float>& v) { return to_bf16(v); }

class Bf16Inputs : public CudaParity {
 protected:
  // A device tensor of `shape` in `dtype`, zero-filled.
  Tensor zeros(DType dtype, std::initializer_list<int64_t> shape) { return dev(host_zeros(dtype, shape)); }
  // A random dense weight [out, in] in f32 or bf16, on the device.
  LinearWeight weight(DType dtype, int64_t out, int64_t in) {
    const std::vector<float> values = normal(rng_, out * in, 1.0f / std::sqrt(float(in)));
    const Tensor w = dtype == DType::kF32 ? host(values, dtype, {out, in}) : host(to_bf16(values), dtype, {out, in});
    return dev_weight(LinearWeight{LinearWeight::Format::kDense, w, Tensor(), out, in});
  }
};

TEST_F(Bf16Inputs, DtypeFollowsTheGemmChoice) {
  EXPECT_EQ(fast_->linear_input_dtype(1), DType::kF32);  // the GEMV reads f32 rows
  EXPECT_EQ(fast_->linear_input_dtype(2), DType::kF32);
  EXPECT_EQ(fast_->linear_input_dtype(3), DType::kBF16);
  EXPECT_EQ(fast_->linear_input_dtype(4096), DType::kBF16);
  EXPECT_EQ(gpu_->linear_input_dtype(4096), DType::kF32);  // exact mode: hi/lo split
  EXPECT_EQ(cpu_->linear_input_dtype(4096), DType::kF32);
  const auto deterministic = make_backend("cuda", BackendOptions{.deterministic = true});
  EXPECT_EQ(deterministic->linear_input_dtype(4096), DType::kF32);  // one kernel for every row count
}

TEST_F(Bf16Inputs, NormsWriteRoundedBf16) {
  // 90: warp per row; 2880, 4096: the vectorised kernel; 4098: the block-per-row kernel.
  for (int64_t width : {90, 2880, 4096, 4098})
    for (bool add_one : {false, true}) {
      const int64_t rows = 5;
      const std::string what = fmt::format("width {} add_one {}", width, add_one);
      const Tensor x = host(normal(rng_, rows * width, 2.0f), DType::kF32, {rows, width});
      const Tensor delta = dev(host(normal(rng_, rows * width), DType::kF32, {rows, width}));
      const Tensor w = dev(host(to_bf16(normal(rng_, width)), DType::kBF16, {width}));
      Tensor x_d = dev(x), out_f32 = zeros(DType::kF32, {rows, width}), out_bf16 = zeros(DType::kBF16, {rows, width});
      gpu_->synchronize();
      fast_->rms_norm(x_d, w, 1e-6f, add_one, out_f32);
      fast_->rms_norm(x_d, w, 1e-6f, add_one, out_bf16);
      fast_->synchronize();
      EXPECT_EQ(fetch<uint16_t>(out_bf16), rounded(fetch<float>(out_f32))) << "rms_norm " << what;

      Tensor x_a = dev(x), x_b = dev(x);
      gpu_->synchronize();
      fast_->add_rms_norm(x_a, delta, w, 1e-6f, add_one, out_f32);
      fast_->add_rms_norm(x_b, delta, w, 1e-6f, add_one, out_bf16);
      fast_->synchronize();
      EXPECT_EQ(fetch<float>(x_b), fetch<float>(x_a)) << "add_rms_norm residual " << what;
      EXPECT_EQ(fetch<uint16_t>(out_bf16), rounded(fetch<float>(out_f32))) << "add_rms_norm " << what;
    }
}

TEST_F(Bf16Inputs, SiluMulWritesRoundedBf16) {
  const int64_t rows = 6, inter = 300;
  const Tensor gate_up = dev(host(normal(rng_, rows * 2 * inter, 3.0f), DType::kF32, {rows, 2 * inter}));
  Tensor out_f32 = zeros(DType::kF32, {rows, inter}), out_bf16 = zeros(DType::kBF16, {rows, inter});
  gpu_->synchronize();
  fast_->silu_mul(gate_up, out_f32);
  fast_->silu_mul(gate_up, out_bf16);
  fast_->synchronize();
  EXPECT_EQ(fetch<uint16_t>(out_bf16), rounded(fetch<float>(out_f32)));
}

TEST_F(Bf16Inputs, LinearOnBf16RowsEqualsLinearOnF32Rows) {
  for (const auto& [in, out_features] : {std::pair<int64_t, int64_t>{256, 96}, std::pair<int64_t, int64_t>{4096, 40}})
    for (int64_t tokens : {3, 9, 200})
      for (bool with_bias : {false, true}) {
        const std::string what = fmt::format("[{}x{}] T={} bias {}", out_features, in, tokens, with_bias);
        const LinearWeight w = weight(DType::kBF16, out_features, in);
        const std::vector<float> x = normal(rng_, tokens * in);
        const Tensor x_f32 = dev(host(x, DType::kF32, {tokens, in}));
        const Tensor x_bf16 = dev(host(to_bf16(x), DType::kBF16, {tokens, in}));
        const Tensor bias =
            with_bias ? dev(host(to_bf16(normal(rng_, out_features)), DType::kBF16, {out_features})) : Tensor();
        Tensor from_f32 = zeros(DType::kF32, {tokens, out_features});
        Tensor from_bf16 = zeros(DType::kF32, {tokens, out_features});
        gpu_->synchronize();
        fast_->linear(x_f32, w, bias, from_f32);
        fast_->linear(x_bf16, w, bias, from_bf16);
        fast_->synchronize();
        EXPECT_EQ(fetch<float>(from_bf16), fetch<float>(from_f32)) << what;
      }
}

TEST_F(Bf16Inputs, Bf16RowsNeedABf16WeightOnTheFastPath) {
  const int64_t tokens = 4, in = 64, out_features = 32;
  const Tensor x = dev(host(to_bf16(normal(rng_, tokens * in)), DType::kBF16, {tokens, in}));
  Tensor out = zeros(DType::kF32, {tokens, out_features});
  const LinearWeight f32_weight = weight(DType::kF32, out_features, in);
  EXPECT_THROW(fast_->linear(x, f32_weight, Tensor(), out), std::exception);
  const LinearWeight bf16_weight = weight(DType::kBF16, out_features, in);
  EXPECT_THROW(gpu_->linear(x, bf16_weight, Tensor(), out), std::exception);  // exact mode keeps f32 rows
}

}  // namespace
}  // namespace rs::cuda_test
