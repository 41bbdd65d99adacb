// Parity of the fused CUDA ops (residual add + RMSNorm; q|k|v split with QK-norm, RoPE and the K/V store) with the CPU
// backend, which runs the same steps unfused.
#include "backend/cuda/parity_test_util.h"

namespace rs::cuda_test {
namespace {

std::vector<float> bf16_to_floats(const std::vector<uint16_t>& bits) {
  std::vector<float> out(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) out[i] = bf16_to_f32(bits[i]);
  return out;
}

TEST_F(CudaParity, AddRmsNorm) {
  for (int64_t width : {90, 96, 2880, 4096}) {  // 90: the scalar kernel; the others the vectorised one
    const int64_t rows = 7;
    const Tensor x = host(normal(rng_, rows * width, 2.0f), DType::kF32, {rows, width});
    const Tensor delta = host(normal(rng_, rows * width), DType::kF32, {rows, width});
    const Tensor w = host(to_bf16(normal(rng_, width)), DType::kBF16, {width});
    Tensor x_d = dev(x), out_d = dev(host_zeros(DType::kF32, {rows, width}));
    Tensor out_h = host_zeros(DType::kF32, {rows, width});
    gpu_->add_rms_norm(x_d, dev(delta), dev(w), 1e-6f, false, out_d);
    cpu_->add_rms_norm(x, delta, w, 1e-6f, false, out_h);  // x updated in place on both
    EXPECT_PARITY(fetch<float>(x_d), as_floats(x), kExact, fmt::format("add_rms_norm sum width {}", width));
    EXPECT_PARITY(fetch<float>(out_d), as_floats(out_h), kElementwise, fmt::format("add_rms_norm width {}", width));
  }
}

TEST_F(CudaParity, QkvPrepare) {
  struct Case {
    int32_t heads, kv_heads, head_dim, rotary_dim;
    bool norms;
  };
  const Case cases[] = {{8, 2, 128, 128, true}, {8, 8, 64, 64, false}, {4, 1, 64, 32, true}, {6, 2, 80, 80, false}};
  const int64_t tokens = 9, cache_rows = 64, max_pos = 512;
  for (const Case& c : cases)
    for (const DType cache_dtype : {DType::kF32, DType::kBF16}) {
      const int64_t hd = c.head_dim, width = (c.heads + 2 * c.kv_heads) * hd;
      std::vector<int32_t> positions(tokens), slots(tokens);
      for (int64_t t = 0; t < tokens; ++t) {
        positions[t] = static_cast<int32_t>(rng_() % max_pos);
        slots[t] = t == 3 ? -1 : static_cast<int32_t>(t * 5 + 2);  // one token writes nothing
      }
      const Tensor qkv = host(normal(rng_, tokens * width), DType::kF32, {tokens, width});
      const Tensor table = host(normal(rng_, max_pos * c.rotary_dim), DType::kF32, {max_pos, c.rotary_dim});
      const Tensor q_norm = c.norms ? host(to_bf16(normal(rng_, hd)), DType::kBF16, {hd}) : Tensor();
      const Tensor k_norm = c.norms ? host(to_bf16(normal(rng_, hd)), DType::kBF16, {hd}) : Tensor();
      const Tensor pos_h = host(positions, DType::kI32, {tokens}), slots_h = host(slots, DType::kI32, {tokens});
      const BatchView batch_h{pos_h, Tensor(), Tensor(), Tensor(), slots_h, 16, 1, 0};
      const BatchView batch_d{dev(pos_h), Tensor(), Tensor(), Tensor(), dev(slots_h), 16, 1, 0};
      Tensor kc_h = host_zeros(cache_dtype, {cache_rows, c.kv_heads, hd}),
             vc_h = host_zeros(cache_dtype, {cache_rows, c.kv_heads, hd});
      Tensor kc_d = dev(kc_h), vc_d = dev(vc_h);
      Tensor q_h = host_zeros(DType::kF32, {tokens, c.heads, hd}), q_d = dev(q_h);
      cpu_->qkv_prepare(qkv, q_norm, k_norm, 1e-6f, table, c.rotary_dim, kc_h, vc_h, batch_h, q_h);
      gpu_->qkv_prepare(dev(qkv), dev(q_norm), dev(k_norm), 1e-6f, dev(table), c.rotary_dim, kc_d, vc_d, batch_d, q_d);
      const std::string what = fmt::format("qkv_prepare {}/{}x{} rot {} norms {} {}", c.heads, c.kv_heads, hd,
                                           c.rotary_dim, c.norms, dtype_name(cache_dtype));
      EXPECT_PARITY(fetch<float>(q_d), as_floats(q_h), kElementwise, what + " q");
      if (cache_dtype == DType::kF32) {
        EXPECT_PARITY(fetch<float>(kc_d), as_floats(kc_h), kElementwise, what + " k cache");
        EXPECT_PARITY(fetch<float>(vc_d), as_floats(vc_h), kExact, what + " v cache");
      } else {  // one bf16 rounding of values that agree to ~1e-6: at most one step of 2^-8 apart
        const uint16_t* kh = kc_h.data_as<uint16_t>();
        const uint16_t* vh = vc_h.data_as<uint16_t>();
        EXPECT_PARITY(bf16_to_floats(fetch<uint16_t>(kc_d)), bf16_to_floats({kh, kh + kc_h.numel()}), 8e-3,
                      what + " k cache");
        EXPECT_EQ(fetch<uint16_t>(vc_d), std::vector<uint16_t>(vh, vh + vc_h.numel())) << what << " v cache";
      }
    }
}

TEST_F(CudaParity, QkvPrepareFlagsBadPositions) {
  const int64_t hd = 32, width = 3 * hd;
  const Tensor qkv = dev(host(normal(rng_, width), DType::kF32, {1, width}));
  const Tensor table = dev(host(normal(rng_, 4 * hd), DType::kF32, {4, hd}));
  const BatchView batch{dev(host(std::vector<int32_t>{4}, DType::kI32, {1})), Tensor(), Tensor(), Tensor(),
                        dev(host(std::vector<int32_t>{0}, DType::kI32, {1})), 16,       1,        0};
  Tensor kc = dev(host_zeros(DType::kF32, {16, 1, hd})), vc = dev(host_zeros(DType::kF32, {16, 1, hd}));
  Tensor q = dev(host_zeros(DType::kF32, {1, 1, hd}));
  gpu_->qkv_prepare(qkv, Tensor(), Tensor(), 1e-6f, table, static_cast<int32_t>(hd), kc, vc, batch, q);
  EXPECT_THROW(gpu_->synchronize(), Error);
}

}  // namespace
}  // namespace rs::cuda_test
