// Parity of CUDA FP8 linears (the FP8 GEMV, and the bf16 dequantization + cuBLAS beyond its rows) with the CPU
// reference on random E4M3 codes and block, per-channel and per-tensor scales.
#include "backend/cuda/parity_test_util.h"

namespace rs::cuda_test {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

LinearWeight random_fp8(std::mt19937& rng, int64_t out, int64_t in, int64_t block_rows, int64_t block_cols,
                        std::vector<std::vector<uint8_t>>& store) {
  std::vector<uint8_t> codes(out * in);
  for (auto& c : codes) {
    do c = static_cast<uint8_t>(rng());
    while ((c & 0x7f) == 0x7f);
  }
  const int64_t rows = ceil_div(out, block_rows), cols = ceil_div(in, block_cols);
  std::uniform_real_distribution<float> dist(0.2f, 1.0f);
  std::vector<float> scales(rows * cols);
  for (auto& s : scales) s = dist(rng) / (448.0f * std::sqrt(float(in)));
  std::vector<uint8_t> scale_bytes(scales.size() * 4);
  std::memcpy(scale_bytes.data(), scales.data(), scale_bytes.size());
  LinearWeight w{LinearWeight::Format::kFp8,
                 Tensor(store.emplace_back(std::move(codes)).data(), DType::kF8E4M3, {out, in}),
                 Tensor(store.emplace_back(std::move(scale_bytes)).data(), DType::kF32, {rows, cols}), out, in};
  w.scale_block_rows = block_rows;
  w.scale_block_cols = block_cols;
  return w;
}

// W8A8 against the exact product of the same quantized activations: Hopper's FP8 tensor cores accumulate with fewer
// bits than f32 (seen: 2-4e-4; a wrong scale order gives ~0.2, bench/cuda/fp8_scale_layouts.cu).
constexpr double kW8A8 = 1e-3;
// ... and against the unquantized activations: E4M3 keeps 3 mantissa bits (up to 2^-4 relative per element).
constexpr double kW8A8VsF32 = 8e-2;

// x [tokens, in] rounded as the W8A8 GEMM quantizes it: per `group` columns of a row, amax / 448 scales, E4M3 codes
// rounded to nearest even, and back (the dequantized activations whose exact product the GEMM computes).
std::vector<float> w8a8_activations(const std::vector<float>& x, int64_t tokens, int64_t in, int64_t group) {
  std::vector<float> out(x.size());
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t g = 0; g < in; g += group) {
      float amax = 0;
      for (int64_t i = g; i < g + group; ++i) amax = std::max(amax, std::fabs(x[t * in + i]));
      const float scale = amax > 0 ? amax / 448.0f : 1.0f;
      for (int64_t i = g; i < g + group; ++i)
        out[t * in + i] = fp8_e4m3_to_f32(f32_to_fp8_e4m3(x[t * in + i] / scale)) * scale;
    }
  return out;
}

struct Layout {
  int64_t out, in, block_rows, block_cols;
  bool w8a8;  // past 8 rows the fast path runs cuBLASLt's FP8 GEMM (else bf16 dequantization + cuBLAS)
};
// 128 x 128 blocks with partial edges (and a K split across warps at in = 4096; 96 rows: not whole blocks, so no
// W8A8), per channel, per tensor; the W8A8 GEMM's two scalings (block scaling pads 3, 9 and 201 tokens to 4s).
const Layout kLayouts[] = {{300, 256, 128, 128, false}, {96, 4096, 128, 128, false}, {37, 96, 1, 96, false},
                           {64, 48, 64, 48, false},     {256, 1024, 1, 1024, true},  {512, 2048, 128, 128, true}};

TEST_F(CudaParity, LinearFp8) {
  for (const Layout l : kLayouts) {
    const LinearWeight wh = random_fp8(rng_, l.out, l.in, l.block_rows, l.block_cols, host_);
    const LinearWeight wd = dev_weight(wh);
    for (int64_t tokens : {1, 2, 3, 8, 9, 64, 201}) {
      for (bool with_bias : {false, true}) {
        const std::vector<float> x = normal(rng_, tokens * l.in);
        const Tensor xh = host(x, DType::kF32, {tokens, l.in});
        const Tensor bias = with_bias ? host(to_bf16(normal(rng_, l.out)), DType::kBF16, {l.out}) : Tensor();
        Tensor ref = host_zeros(DType::kF32, {tokens, l.out});
        cpu_->linear(xh, wh, bias, ref);
        const std::string what = fmt::format("linear fp8 [{}x{}] blocks {}x{} T={}{}", l.out, l.in, l.block_rows,
                                             l.block_cols, tokens, with_bias ? " +bias" : "");
        Tensor out = dev(host_zeros(DType::kF32, {tokens, l.out}));
        gpu_->linear(dev(xh), wd, dev(bias), out);
        EXPECT_PARITY(fetch<float>(out), as_floats(ref), kF32Dot, what);
        // The fast path: the FP8 GEMV up to 2 rows; beyond, the W8A8 GEMM where cuBLASLt takes the scaling, else the
        // GEMV up to 8 rows and the weight dequantized to bf16 (activations rounded) beyond.
        Tensor fast = dev(host_zeros(DType::kF32, {tokens, l.out}));
        const Tensor x_d = dev(xh), bias_d = dev(bias);
        gpu_->synchronize();
        fast_->linear(x_d, wd, bias_d, fast);
        fast_->synchronize();
        if (tokens > 2 && l.w8a8) {
          const int64_t group = l.block_rows == 1 ? l.in : 128;
          const Tensor xq = host(w8a8_activations(x, tokens, l.in, group), DType::kF32, {tokens, l.in});
          Tensor ref_w8a8 = host_zeros(DType::kF32, {tokens, l.out});
          cpu_->linear(xq, wh, bias, ref_w8a8);
          EXPECT_PARITY(fetch<float>(fast), as_floats(ref_w8a8), kW8A8, what + " fast (W8A8)");
          EXPECT_PARITY(fetch<float>(fast), as_floats(ref), kW8A8VsF32, what + " fast (W8A8) vs f32");
        } else {
          EXPECT_PARITY(fetch<float>(fast), as_floats(ref), tokens <= 8 ? kF32Dot : 2 * kBf16Fast, what + " fast");
        }
      }
    }
  }
}

TEST_F(CudaParity, LinearSiluMulFp8) {
  const LinearWeight wh = random_fp8(rng_, 2 * 256, 1024, 128, 128, host_);
  const LinearWeight wd = dev_weight(wh);
  for (int64_t tokens : {1, 2, 5, 8}) {
    const Tensor xh = host(normal(rng_, tokens * 1024), DType::kF32, {tokens, 1024});
    Tensor gate_up_h = host_zeros(DType::kF32, {tokens, 512}), ref = host_zeros(DType::kF32, {tokens, 256});
    cpu_->linear(xh, wh, Tensor(), gate_up_h);
    cpu_->silu_mul(gate_up_h, ref);
    for (Backend* backend : {gpu_.get(), fast_.get()}) {
      const Tensor x_d = dev(xh);
      Tensor scratch = dev(host_zeros(DType::kF32, {tokens, 512}));
      Tensor fused = dev(host_zeros(DType::kF32, {tokens, 256})), plain = dev(host_zeros(DType::kF32, {tokens, 256}));
      gpu_->synchronize();
      backend->linear_silu_mul(x_d, wd, scratch, fused);
      backend->linear(x_d, wd, Tensor(), scratch);
      backend->silu_mul(scratch, plain);
      backend->synchronize();
      const std::string what = fmt::format("linear_silu_mul fp8 T={}", tokens);
      EXPECT_EQ(fetch<float>(fused), fetch<float>(plain)) << what;
      // Past 2 rows the fast path's linear may be the W8A8 GEMM.
      const bool w8a8 = backend == fast_.get() && tokens > 2;
      EXPECT_PARITY(fetch<float>(fused), as_floats(ref), w8a8 ? kW8A8VsF32 : kF32Dot + kElementwise, what);
    }
  }
}

}  // namespace
}  // namespace rs::cuda_test
