// Parity of the CUDA linear layers (GEMV, cuBLAS, tiled GEMM over f32/bf16/f16/MXFP4 weights) and MoE routing and
// experts with the CPU reference backend on random inputs.
#include "backend/cuda/parity_test_util.h"

namespace rs::cuda_test {
namespace {

// A random host weight [out, in] in `format` (MXFP4: random codes, scales 2^-9 .. 2^3, or 2^-3 .. 2^0 with
// narrow_scales: checkpoint-like, so that bf16 rounding elsewhere stays within a predictable error).
LinearWeight random_weight(std::mt19937& rng, DType dtype, bool mxfp4, int64_t out, int64_t in,
                           std::vector<std::vector<uint8_t>>& store, bool narrow_scales = false) {
  LinearWeight w;
  w.out_features = out;
  w.in_features = in;
  auto keep = [&](std::vector<uint8_t> bytes) -> void* { return store.emplace_back(std::move(bytes)).data(); };
  if (mxfp4) {
    w.format = LinearWeight::Format::kMxfp4;
    std::vector<uint8_t> blocks(out * in / 2), scales(out * in / 32);
    for (auto& b : blocks) b = static_cast<uint8_t>(rng());
    for (auto& s : scales) s = static_cast<uint8_t>(narrow_scales ? 124 + rng() % 4 : 118 + rng() % 13);
    w.weight = Tensor(keep(std::move(blocks)), DType::kU8, {out, in / 32, 16});
    w.scales = Tensor(keep(std::move(scales)), DType::kU8, {out, in / 32});
    return w;
  }
  const auto values = normal(rng, out * in, 1.0f / std::sqrt(float(in)));
  std::vector<uint8_t> bytes;
  if (dtype == DType::kF32) {
    bytes.resize(values.size() * 4);
    std::memcpy(bytes.data(), values.data(), bytes.size());
  } else {
    const auto half = dtype == DType::kBF16 ? to_bf16(values) : to_f16(values);
    bytes.resize(half.size() * 2);
    std::memcpy(bytes.data(), half.data(), bytes.size());
  }
  w.weight = Tensor(keep(std::move(bytes)), dtype, {out, in});
  return w;
}

// Rows up to which the fast path keeps the f32-activation GEMV (kernels.cuh kGemvFastMaxRows).
constexpr int64_t kFastGemvRows = 2;

TEST_F(CudaParity, Linear) {
  struct Shape {
    int64_t in, out;
  };
  for (int variant = 0; variant < 4; ++variant) {
    const bool mxfp4 = variant == 3;
    const DType dtype = variant == 0   ? DType::kF32
                        : variant == 1 ? DType::kBF16
                        : variant == 2 ? DType::kF16
                                       : DType::kU8;
    const std::vector<Shape> shapes =
        mxfp4 ? std::vector<Shape>{{256, 96}, {96, 37}}
              : std::vector<Shape>{{256, 96}, {100, 37}, {4096, 40}};  // the last: K split across warps
    for (const Shape s : shapes) {
      const LinearWeight wh = random_weight(rng_, dtype, mxfp4, s.out, s.in, host_);
      const LinearWeight wd = dev_weight(wh);
      for (int64_t tokens : {1, 3, 8, 9, 64, 200}) {
        for (bool with_bias : {false, true}) {
          const Tensor xh = host(normal(rng_, tokens * s.in), DType::kF32, {tokens, s.in});
          const Tensor bias = with_bias ? host(to_bf16(normal(rng_, s.out)), DType::kBF16, {s.out}) : Tensor();
          Tensor ref = host_zeros(DType::kF32, {tokens, s.out});
          cpu_->linear(xh, wh, bias, ref);
          Tensor out = dev(host_zeros(DType::kF32, {tokens, s.out}));
          gpu_->linear(dev(xh), wd, dev(bias), out);
          const bool split = dtype == DType::kBF16 && !mxfp4 && (tokens > 8 || s.in % 8 != 0);
          const std::string what = fmt::format("linear {} [{}x{}] T={}{}", mxfp4 ? "mxfp4" : dtype_name(dtype), s.out,
                                               s.in, tokens, with_bias ? " +bias" : "");
          EXPECT_PARITY(fetch<float>(out), as_floats(ref), split ? kBf16Split : kF32Dot, what);
          // The fast path: the same product with activations rounded to bf16 where a bf16 GEMM runs.
          Tensor fast = dev(host_zeros(DType::kF32, {tokens, s.out}));
          const Tensor x_d = dev(xh), bias_d = dev(bias);
          gpu_->synchronize();  // the two backends have their own streams
          fast_->linear(x_d, wd, bias_d, fast);
          fast_->synchronize();
          // bf16 GEMMs (cuBLAS, or the tensor-core kernel for MXFP4) round the activations to bf16.
          const bool rounded = (dtype == DType::kBF16 && !mxfp4 && (tokens > kFastGemvRows || s.in % 8 != 0)) ||
                               (mxfp4 && tokens > kFastGemvRows);
          EXPECT_PARITY(fetch<float>(fast), as_floats(ref), rounded ? kBf16Fast : kF32Dot, what + " fast");
        }
      }
    }
  }
}

// The fused SwiGLU input (one GEMV pass over gate | up for decode batches; linear + silu_mul beyond) against the CPU's
// unfused steps, and bit for bit against the same backend's unfused ops (the fused kernel sums in the same order).
TEST_F(CudaParity, LinearSiluMul) {
  // 100 features: the last block has idle warps; in 4096: K split across warps.
  for (const auto& [in, inter] : {std::pair<int64_t, int64_t>{264, 100}, std::pair<int64_t, int64_t>{4096, 36}})
    for (const DType dtype : {DType::kBF16, DType::kF32}) {
      const LinearWeight wh = random_weight(rng_, dtype, false, 2 * inter, in, host_);
      const LinearWeight wd = dev_weight(wh);
      for (int64_t tokens : {1, 2, 3, 8, 9}) {
        const Tensor xh = host(normal(rng_, tokens * in), DType::kF32, {tokens, in});
        Tensor gate_up_h = host_zeros(DType::kF32, {tokens, 2 * inter}), ref = host_zeros(DType::kF32, {tokens, inter});
        cpu_->linear(xh, wh, Tensor(), gate_up_h);
        cpu_->silu_mul(gate_up_h, ref);
        const std::string what =
            fmt::format("linear_silu_mul {} [{}x{}] T={}", dtype_name(dtype), 2 * inter, in, tokens);
        for (Backend* backend : {gpu_.get(), fast_.get()}) {
          const Tensor x_d = dev(xh);
          Tensor scratch = dev(host_zeros(DType::kF32, {tokens, 2 * inter}));
          Tensor fused = dev(host_zeros(DType::kF32, {tokens, inter})),
                 plain = dev(host_zeros(DType::kF32, {tokens, inter}));
          gpu_->synchronize();  // dev() copies on gpu_'s stream
          backend->linear_silu_mul(x_d, wd, scratch, fused);
          backend->linear(x_d, wd, Tensor(), scratch);
          backend->silu_mul(scratch, plain);
          backend->synchronize();
          EXPECT_EQ(fetch<float>(fused), fetch<float>(plain)) << what;
          const bool rounded = backend == fast_.get() && dtype == DType::kBF16 && tokens > kFastGemvRows;
          EXPECT_PARITY(fetch<float>(fused), as_floats(ref), rounded ? kBf16Fast : kF32Dot + kElementwise, what);
        }
      }
    }
}

TEST_F(CudaParity, MoeRoute) {
  for (int32_t experts : {8, 128}) {
    for (int32_t k : {2, 4}) {
      for (int mode = 0; mode < 3; ++mode) {
        const MoeRouting routing = mode == 0 ? MoeRouting::kTopKSoftmax : MoeRouting::kSoftmaxTopK;
        const bool renormalize = mode == 2;
        const int64_t tokens = 33;
        const Tensor logits = host(normal(rng_, tokens * experts, 2.0f), DType::kF32, {tokens, experts});
        Tensor ids_ref = host_zeros(DType::kI32, {tokens, k}), w_ref = host_zeros(DType::kF32, {tokens, k});
        cpu_->moe_route(logits, routing, renormalize, ids_ref, w_ref);
        Tensor ids = dev(ids_ref), w = dev(w_ref);
        gpu_->moe_route(dev(logits), routing, renormalize, ids, w);
        const auto got_ids = fetch<int32_t>(ids);
        EXPECT_TRUE(std::equal(got_ids.begin(), got_ids.end(), ids_ref.data_as<int32_t>())) << experts << " " << k;
        EXPECT_PARITY(fetch<float>(w), as_floats(w_ref), kElementwise,
                      fmt::format("moe_route E={} k={} mode {}", experts, k, mode));
      }
    }
  }
}

struct MoeCase {
  MoeActivation activation;
  DType dtype;
  bool mxfp4;
  int32_t experts, top_k;
  int64_t hidden, inter;
};

// MoE parity fixture: random experts of a case on the host and their device copies (gpt-oss: with biases).
class MoeParity : public CudaParity {
 protected:
  void make_experts(const MoeCase& c, bool narrow_scales, MoeWeights& host_experts, MoeWeights& dev_experts) {
    host_experts.activation = dev_experts.activation = c.activation;
    const bool gpt_oss = c.activation == MoeActivation::kClampedSwiGlu;
    for (int32_t e = 0; e < c.experts; ++e) {
      auto add = [&](std::vector<LinearWeight>& h, std::vector<LinearWeight>& d, int64_t out, int64_t in) {
        h.push_back(random_weight(rng_, c.dtype, c.mxfp4, out, in, host_, narrow_scales));
        d.push_back(dev_weight(h.back()));
      };
      if (gpt_oss) {
        add(host_experts.gate_up, dev_experts.gate_up, 2 * c.inter, c.hidden);
      } else {
        add(host_experts.gate, dev_experts.gate, c.inter, c.hidden);
        add(host_experts.up, dev_experts.up, c.inter, c.hidden);
      }
      add(host_experts.down, dev_experts.down, c.hidden, c.inter);
    }
    if (gpt_oss) {
      host_experts.gate_up_bias =
          host(to_bf16(normal(rng_, c.experts * 2 * c.inter)), DType::kBF16, {c.experts, 2 * c.inter});
      host_experts.down_bias = host(normal(rng_, c.experts * c.hidden), DType::kF32, {c.experts, c.hidden});
      dev_experts.gate_up_bias = dev(host_experts.gate_up_bias);
      dev_experts.down_bias = dev(host_experts.down_bias);
    }
  }

  // The fast backend's moe_experts and the CPU reference for router logits [tokens, experts] (routed on the CPU) and
  // random activations exact in bf16 (so that the only rounding is the intermediate activation's): {out, ref}.
  std::pair<std::vector<float>, std::vector<float>> run_fast(const MoeCase& c, const MoeWeights& host_experts,
                                                             const MoeWeights& dev_experts,
                                                             const std::vector<float>& logit_values) {
    const int64_t tokens = static_cast<int64_t>(logit_values.size()) / c.experts;
    const Tensor logits = host(logit_values, DType::kF32, {tokens, int64_t{c.experts}});
    Tensor ids = host_zeros(DType::kI32, {tokens, c.top_k}), w = host_zeros(DType::kF32, {tokens, c.top_k});
    cpu_->moe_route(logits, MoeRouting::kTopKSoftmax, false, ids, w);
    std::vector<float> x_values = normal(rng_, tokens * c.hidden, 2.0f);
    for (float& v : x_values) v = bf16_to_f32(f32_to_bf16(v));
    const Tensor x = host(x_values, DType::kF32, {tokens, c.hidden});
    Tensor ref = host_zeros(DType::kF32, {tokens, c.hidden});
    cpu_->moe_experts(x, ids, w, host_experts, ref);
    const Tensor x_d = dev(x), ids_d = dev(ids), w_d = dev(w);
    Tensor out = dev(host_zeros(DType::kF32, {tokens, c.hidden}));
    gpu_->synchronize();  // the two backends have their own streams
    fast_->moe_experts(x_d, ids_d, w_d, dev_experts, out);
    fast_->synchronize();
    return {fetch<float>(out), as_floats(ref)};
  }
};

TEST_F(MoeParity, MoeExperts) {
  const MoeCase cases[] = {
      {MoeActivation::kSwiGlu, DType::kBF16, false, 8, 2, 128, 64},
      {MoeActivation::kClampedSwiGlu, DType::kU8, true, 4, 2, 64, 96},
      {MoeActivation::kClampedSwiGlu, DType::kF32, false, 32, 4, 96, 64},
  };
  for (const MoeCase& c : cases) {
    MoeWeights host_experts, dev_experts;
    make_experts(c, /*narrow_scales=*/false, host_experts, dev_experts);
    const bool gpt_oss = c.activation == MoeActivation::kClampedSwiGlu;
    for (int64_t tokens : {1, 3, 40, 300}) {
      const Tensor logits = host(normal(rng_, tokens * c.experts), DType::kF32, {tokens, int64_t{c.experts}});
      Tensor ids = host_zeros(DType::kI32, {tokens, c.top_k}), w = host_zeros(DType::kF32, {tokens, c.top_k});
      cpu_->moe_route(logits, MoeRouting::kTopKSoftmax, false, ids, w);
      const Tensor x = host(normal(rng_, tokens * c.hidden, 2.0f), DType::kF32, {tokens, c.hidden});
      Tensor ref = host_zeros(DType::kF32, {tokens, c.hidden});
      cpu_->moe_experts(x, ids, w, host_experts, ref);
      Tensor out = dev(host_zeros(DType::kF32, {tokens, c.hidden}));
      gpu_->moe_experts(dev(x), dev(ids), dev(w), dev_experts, out);
      EXPECT_PARITY(fetch<float>(out), as_floats(ref), kMoe,
                    fmt::format("moe_experts {} {} E={} k={} T={}", gpt_oss ? "gpt-oss" : "swiglu",
                                c.mxfp4 ? "mxfp4" : dtype_name(c.dtype), c.experts, c.top_k, tokens));
    }
  }
}

// The fast path's MoE (tensor-core grouped GEMM with the gated activation in its epilogue beyond decode batches, the
// fused-pair GEMV below) against the CPU reference: bf16 and MXFP4 experts, K with a half-filled last 64-wide tile,
// ragged rows per expert (chunks of 64 rows and partial ones), all tokens on the same experts, top-k ties. The inputs
// are exact in bf16 and MXFP4 scales checkpoint-like, so that the only rounding is the intermediate activation's
// (a numpy model of these shapes gives <= 2.8e-3 normalised error; a wrong weight, scale or row is O(1)).
TEST_F(MoeParity, MoeExpertsFast) {
  const MoeCase cases[] = {
      {MoeActivation::kSwiGlu, DType::kBF16, false, 16, 4, 256, 96},
      {MoeActivation::kClampedSwiGlu, DType::kU8, true, 8, 4, 96, 160},
      {MoeActivation::kSwiGlu, DType::kU8, true, 8, 2, 128, 64},
  };
  for (const MoeCase& c : cases) {
    MoeWeights host_experts, dev_experts;
    make_experts(c, /*narrow_scales=*/true, host_experts, dev_experts);
    const bool gpt_oss = c.activation == MoeActivation::kClampedSwiGlu;
    for (int routing = 0; routing < 3; ++routing) {  // random | every token on the same experts | all logits tied
      for (int64_t tokens : {1, 5, 64, 300, 700}) {
        std::vector<float> logit_values = normal(rng_, tokens * c.experts);
        if (routing == 1)
          for (int64_t t = 0; t < tokens; ++t) logit_values[t * c.experts + 3] = 50.0f;
        if (routing == 2) std::fill(logit_values.begin(), logit_values.end(), 0.5f);
        const auto [out, ref] = run_fast(c, host_experts, dev_experts, logit_values);
        // One row (decode) of bf16 experts runs the f32 GEMV; MXFP4 experts and more rows round activations to
        // bf16 on the tensor cores.
        EXPECT_PARITY(out, ref, tokens == 1 && !c.mxfp4 ? kMoe : kBf16Fast,
                      fmt::format("moe_experts fast {} {} E={} k={} T={} routing {}", gpt_oss ? "gpt-oss" : "swiglu",
                                  c.mxfp4 ? "mxfp4" : dtype_name(c.dtype), c.experts, c.top_k, tokens, routing));
      }
    }
  }
}

// Backend::moe (routing inside: decode batches route and sort in one launch, larger ones in two) against the CPU's
// moe_route + moe_experts: the same ids, weights and outputs, for both routing conventions, all logits tied, and
// token counts on both sides of the fused launch's limit.
TEST_F(MoeParity, MoeWithRouting) {
  const MoeCase cases[] = {
      {MoeActivation::kSwiGlu, DType::kBF16, false, 128, 8, 128, 64},
      {MoeActivation::kClampedSwiGlu, DType::kU8, true, 32, 4, 96, 64},
  };
  for (const MoeCase& c : cases) {
    MoeWeights host_experts, dev_experts;
    make_experts(c, /*narrow_scales=*/true, host_experts, dev_experts);
    for (int mode = 0; mode < 4; ++mode) {  // top-k softmax | softmax top-k | renormalised | tied logits
      const MoeRouting routing = mode == 0 ? MoeRouting::kTopKSoftmax : MoeRouting::kSoftmaxTopK;
      const bool renormalize = mode >= 2;
      for (int64_t tokens : {1, 2, 7, 32, 33, 100}) {
        std::vector<float> logit_values = normal(rng_, tokens * c.experts, 2.0f);
        if (mode == 3) std::fill(logit_values.begin(), logit_values.end(), 0.25f);
        const Tensor logits = host(logit_values, DType::kF32, {tokens, int64_t{c.experts}});
        Tensor ids_ref = host_zeros(DType::kI32, {tokens, c.top_k}), w_ref = host_zeros(DType::kF32, {tokens, c.top_k});
        cpu_->moe_route(logits, routing, renormalize, ids_ref, w_ref);
        std::vector<float> x_values = normal(rng_, tokens * c.hidden, 2.0f);
        for (float& v : x_values) v = bf16_to_f32(f32_to_bf16(v));  // exact in bf16: only the activation rounds
        const Tensor x = host(x_values, DType::kF32, {tokens, c.hidden});
        Tensor ref = host_zeros(DType::kF32, {tokens, c.hidden});
        cpu_->moe_experts(x, ids_ref, w_ref, host_experts, ref);
        for (Backend* backend : {gpu_.get(), fast_.get()}) {
          Tensor ids = dev(host_zeros(DType::kI32, {tokens, c.top_k}));
          Tensor w = dev(host_zeros(DType::kF32, {tokens, c.top_k}));
          Tensor out = dev(host_zeros(DType::kF32, {tokens, c.hidden}));
          gpu_->synchronize();
          backend->moe(dev(x), dev(logits), routing, renormalize, dev_experts, ids, w, out);
          backend->synchronize();
          const std::string what =
              fmt::format("moe {} E={} k={} mode {} T={} {}", c.mxfp4 ? "mxfp4" : "bf16", c.experts, c.top_k, mode,
                          tokens, backend == gpu_.get() ? "f32" : "fast");
          const auto got_ids = fetch<int32_t>(ids);
          EXPECT_TRUE(std::equal(got_ids.begin(), got_ids.end(), ids_ref.data_as<int32_t>())) << what;
          EXPECT_PARITY(fetch<float>(w), as_floats(w_ref), kElementwise, what + " weights");
          const bool rounded = backend == fast_.get() && (c.mxfp4 || tokens > 1);
          EXPECT_PARITY(fetch<float>(out), as_floats(ref), rounded ? kBf16Fast : kMoe, what);
        }
      }
    }
  }
}

// Decode batches of MXFP4 experts (the tensor-core GEMV: 1-8 rows per chunk) at K large enough for every K split
// (45 and 65 blocks: partial last 4-block steps), E8M0 scales past 2^1 (the two-factor scaling), gated pairs from
// one interleaved weight (gpt-oss) and from two (SwiGLU), against the CPU reference.
TEST_F(MoeParity, MoeExpertsFastDecode) {
  const MoeCase cases[] = {
      {MoeActivation::kClampedSwiGlu, DType::kU8, true, 8, 4, 1440, 2080},
      {MoeActivation::kSwiGlu, DType::kU8, true, 16, 2, 2080, 1440},
      {MoeActivation::kClampedSwiGlu, DType::kU8, true, 4, 2, 256, 128},
      {MoeActivation::kClampedSwiGlu, DType::kU8, true, 4, 2, 544, 288},  // K split 2; a block past the last tile
  };
  for (const bool narrow : {true, false}) {
    for (const MoeCase& c : cases) {
      MoeWeights host_experts, dev_experts;
      make_experts(c, narrow, host_experts, dev_experts);
      for (int64_t tokens : {1, 2, 3, 5, 9}) {
        const auto [out, ref] = run_fast(c, host_experts, dev_experts, normal(rng_, tokens * c.experts));
        EXPECT_PARITY(out, ref, kBf16Fast,
                      fmt::format("moe_experts fast decode {} E={} k={} K={}/{} T={} scales {}",
                                  c.activation == MoeActivation::kClampedSwiGlu ? "gpt-oss" : "swiglu", c.experts,
                                  c.top_k, c.hidden, c.inter, tokens, narrow ? "narrow" : "wide"));
      }
    }
  }
}

}  // namespace
}  // namespace rs::cuda_test
