// Parity of CUDA integer linears (LinearWeight::kAffine: the int4/int8 GEMV, the bf16 dequantization + cuBLAS beyond
// its rows, and 2-bit weights dequantized by prepare_linear) with the CPU reference on random codes, scales and biases.
#include <algorithm>

#include "backend/cpu/kernels/kernels.h"
#include "backend/cuda/parity_test_util.h"

namespace rs::cuda_test {
namespace {

LinearWeight random_affine(std::mt19937& rng, int64_t out, int64_t in, int bits, int64_t group,
                           std::vector<std::vector<uint8_t>>& store) {
  std::vector<uint8_t> codes(out * in * bits / 8);
  for (auto& c : codes) c = static_cast<uint8_t>(rng());
  const int64_t groups = in / group;
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> pairs(out * groups * 2);
  for (int64_t i = 0; i < out * groups; ++i) {
    // A 16-bit scale (as every checkpoint stores) keeps scale * q exact, as the formats' reference assumes.
    pairs[2 * i] = bf16_to_f32(f32_to_bf16((1.5f + dist(rng)) / ((1 << bits) * std::sqrt(float(in)))));
    pairs[2 * i + 1] = bf16_to_f32(f32_to_bf16(dist(rng) / std::sqrt(float(in))));
  }
  std::vector<uint8_t> pair_bytes(pairs.size() * 4);
  std::memcpy(pair_bytes.data(), pairs.data(), pair_bytes.size());
  LinearWeight w{LinearWeight::Format::kAffine,
                 Tensor(store.emplace_back(std::move(codes)).data(), DType::kU8, {out, in * bits / 8}),
                 Tensor(store.emplace_back(std::move(pair_bytes)).data(), DType::kF32, {out, groups, 2}), out, in};
  w.scale_block_rows = 1;
  w.scale_block_cols = group;
  w.bits = bits;
  return w;
}

struct Layout {
  int64_t out, in;
  int bits;
  int64_t group;
};
// int4 in groups of 32 (one vector), 64 and 128; int4 re-tiled by prepare_linear where in % 1024 == 0 (K split across
// warps at in = 4096, one tile at 1024, groups of 32 to 128); int8 in groups of 16 and 64; 2-bit (dequantized by
// prepare_linear); odd output counts (a warp's second row absent).
const Layout kLayouts[] = {{300, 256, 4, 32}, {96, 4096, 4, 128}, {37, 96, 4, 32},
                           {64, 512, 4, 64},  {65, 1024, 4, 32},  {48, 3072, 4, 64},
                           {77, 256, 8, 16},  {128, 4096, 8, 64}, {40, 128, 2, 32}};

TEST_F(CudaParity, LinearInteger) {
  for (const Layout l : kLayouts) {
    const LinearWeight wh = random_affine(rng_, l.out, l.in, l.bits, l.group, host_);
    LinearWeight wd = dev_weight(wh), wd_fast = dev_weight(wh);
    gpu_->prepare_linear(wd, weights_);
    fast_->prepare_linear(wd_fast, weights_);
    EXPECT_EQ(wd.format == LinearWeight::Format::kAffine, l.bits != 2);
    EXPECT_EQ(!wd.packed.empty(), l.bits == 4 && l.in % 1024 == 0);  // re-tiled for exact mode's GEMV
    EXPECT_TRUE(wd_fast.packed.empty());                             // the tensor-core GEMV reads codes as stored
    for (int64_t tokens : {1, 2, 3, 8, 9, 64, 65, 130}) {
      for (bool with_bias : {false, true}) {
        const Tensor xh = host(normal(rng_, tokens * l.in), DType::kF32, {tokens, l.in});
        const Tensor bias = with_bias ? host(to_bf16(normal(rng_, l.out)), DType::kBF16, {l.out}) : Tensor();
        Tensor ref = host_zeros(DType::kF32, {tokens, l.out});
        cpu_->linear(xh, wh, bias, ref);
        const std::string what = fmt::format("linear int{} [{}x{}] group {} T={}{}", l.bits, l.out, l.in, l.group,
                                             tokens, with_bias ? " +bias" : "");
        Tensor out = dev(host_zeros(DType::kF32, {tokens, l.out}));
        gpu_->linear(dev(xh), wd, dev(bias), out);
        EXPECT_PARITY(fetch<float>(out), as_floats(ref), kF32Dot, what);
        // The fast path: int4 on tensor cores up to 16 rows in chunks (weights and activations rounded to bf16, f32
        // sums), the SIMT GEMV for int8 up to 8 rows, the weight dequantized to bf16 beyond.
        Tensor fast = dev(host_zeros(DType::kF32, {tokens, l.out}));
        const Tensor x_d = dev(xh), bias_d = dev(bias);
        gpu_->synchronize();
        fast_->linear(x_d, wd_fast, bias_d, fast);
        fast_->synchronize();
        const bool gemv = tokens <= 8 && l.bits == 8;
        EXPECT_PARITY(fetch<float>(fast), as_floats(ref), gemv ? kF32Dot : 2 * kBf16Fast, what + " fast");
      }
    }
  }
}

// GPTQ act-order: columns stored in group order, the activations gathered by input_order first (int4 on both paths,
// and 2-bit dequantized by prepare_linear keeping the order).
TEST_F(CudaParity, LinearIntegerActOrder) {
  for (const Layout l : {Layout{96, 1024, 4, 32}, Layout{40, 256, 2, 64}}) {
    LinearWeight wh = random_affine(rng_, l.out, l.in, l.bits, l.group, host_);
    std::vector<int32_t> order(l.in);
    for (int64_t i = 0; i < l.in; ++i) order[i] = static_cast<int32_t>(i);
    std::shuffle(order.begin(), order.end(), rng_);
    std::vector<uint8_t> order_bytes(l.in * 4);
    std::memcpy(order_bytes.data(), order.data(), order_bytes.size());
    wh.input_order = Tensor(host_.emplace_back(std::move(order_bytes)).data(), DType::kI32, {l.in});
    LinearWeight wd = dev_weight(wh), wd_fast = dev_weight(wh);
    wd.input_order = gpu_->upload_weight(wh.input_order, weights_);
    wd_fast.input_order = gpu_->upload_weight(wh.input_order, weights_);
    gpu_->prepare_linear(wd, weights_);
    fast_->prepare_linear(wd_fast, weights_);
    for (int64_t tokens : {1, 5, 40}) {
      const Tensor xh = host(normal(rng_, tokens * l.in), DType::kF32, {tokens, l.in});
      Tensor ref = host_zeros(DType::kF32, {tokens, l.out});
      cpu_->linear(xh, wh, Tensor(), ref);
      // The reference itself: the same weight with its columns moved back to their inputs.
      std::vector<float> direct(tokens * l.out, 0.0f);
      std::vector<float> row(l.in);
      for (int64_t o = 0; o < l.out; ++o) {
        cpu::decode_affine_row(wh, o, row.data());
        for (int64_t t = 0; t < tokens; ++t)
          for (int64_t j = 0; j < l.in; ++j) direct[t * l.out + o] += row[j] * xh.data_as<float>()[t * l.in + order[j]];
      }
      const std::string what = fmt::format("linear int{} act-order [{}x{}] T={}", l.bits, l.out, l.in, tokens);
      EXPECT_PARITY(as_floats(ref), direct, kF32Dot, what + " cpu");
      Tensor out = dev(host_zeros(DType::kF32, {tokens, l.out})), fast = dev(host_zeros(DType::kF32, {tokens, l.out}));
      const Tensor x_d = dev(xh);
      gpu_->linear(x_d, wd, Tensor(), out);
      gpu_->synchronize();
      fast_->linear(x_d, wd_fast, Tensor(), fast);
      fast_->synchronize();
      EXPECT_PARITY(fetch<float>(out), as_floats(ref), kF32Dot, what);
      EXPECT_PARITY(fetch<float>(fast), as_floats(ref), 2 * kBf16Fast, what + " fast");
    }
  }
}

// Embedding lookups from integer codes (MLX quantizes the table): exactly the CPU's rows, 2, 4 and 8 bits.
TEST_F(CudaParity, EmbeddingInteger) {
  for (const Layout l : {Layout{300, 256, 4, 64}, Layout{64, 96, 8, 32}, Layout{50, 128, 2, 32}}) {
    const LinearWeight wh = random_affine(rng_, l.out, l.in, l.bits, l.group, host_);
    const LinearWeight wd = dev_weight(wh);
    const std::vector<int32_t> ids = {0, static_cast<int32_t>(l.out - 1), 7, 7, 3};
    const Tensor ids_h = host(ids, DType::kI32, {static_cast<int64_t>(ids.size())});
    Tensor ref = host_zeros(DType::kF32, {static_cast<int64_t>(ids.size()), l.in});
    cpu_->embedding_affine(wh, ids_h, ref);
    Tensor out = dev(host_zeros(DType::kF32, {static_cast<int64_t>(ids.size()), l.in}));
    gpu_->embedding_affine(wd, dev(ids_h), out);
    EXPECT_EQ(fetch<float>(out), as_floats(ref)) << "embedding int" << l.bits;
  }
}

TEST_F(CudaParity, LinearSiluMulInt4) {
  const LinearWeight wh = random_affine(rng_, 2 * 256, 1024, 4, 64, host_);
  const LinearWeight wd = dev_weight(wh);  // as stored: the SIMT GEMV in exact mode, tensor cores in the fast path
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
      const std::string what = fmt::format("linear_silu_mul int4 T={}", tokens);
      EXPECT_EQ(fetch<float>(fused), fetch<float>(plain)) << what;
      const bool fast = backend == fast_.get();  // tensor cores on bf16 weights and activations
      EXPECT_PARITY(fetch<float>(fused), as_floats(ref), fast ? 2 * kBf16Fast : kF32Dot + kElementwise, what);
    }
  }
}

}  // namespace
}  // namespace rs::cuda_test
