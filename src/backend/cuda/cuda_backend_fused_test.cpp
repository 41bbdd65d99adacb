// Parity of the fused CUDA ops (residual add + RMSNorm; q|k|v split with QK-norm, RoPE and the K/V store) with the CPU
// backend, which runs the same steps unfused; and the decode attention kernel that does that split itself against
// the two separate CUDA ops.
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
    for (const DType cache_dtype : {DType::kF32, DType::kBF16, DType::kF8E4M3}) {
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
      const float k_scale = cache_dtype == DType::kF8E4M3 ? 0.5f : 1.0f;
      const float v_scale = cache_dtype == DType::kF8E4M3 ? 0.25f : 1.0f;
      cpu_->qkv_prepare(qkv, q_norm, k_norm, 1e-6f, table, c.rotary_dim, {kc_h, vc_h, k_scale, v_scale}, batch_h, q_h);
      gpu_->qkv_prepare(dev(qkv), dev(q_norm), dev(k_norm), 1e-6f, dev(table), c.rotary_dim,
                        {kc_d, vc_d, k_scale, v_scale}, batch_d, q_d);
      const std::string what = fmt::format("qkv_prepare {}/{}x{} rot {} norms {} {}", c.heads, c.kv_heads, hd,
                                           c.rotary_dim, c.norms, dtype_name(cache_dtype));
      EXPECT_PARITY(fetch<float>(q_d), as_floats(q_h), kElementwise, what + " q");
      if (cache_dtype == DType::kF32) {
        EXPECT_PARITY(fetch<float>(kc_d), as_floats(kc_h), kElementwise, what + " k cache");
        EXPECT_PARITY(fetch<float>(vc_d), as_floats(vc_h), kExact, what + " v cache");
      } else if (cache_dtype == DType::kF8E4M3) {
        // k: one e4m3 rounding of values that agree to ~1e-6, so at most one code step apart; v: identical codes.
        const std::vector<uint8_t> k_got = fetch<uint8_t>(kc_d);
        const uint8_t* kh = kc_h.data_as<uint8_t>();
        int64_t apart = 0;
        for (int64_t i = 0; i < kc_h.numel(); ++i) {
          const float got = fp8_e4m3_to_f32(k_got[i]), ref = fp8_e4m3_to_f32(kh[i]);
          const float step = std::max(std::abs(ref) / 8.0f, 1.0f / 512.0f);
          EXPECT_LE(std::abs(got - ref), step) << what << " k cache element " << i;
          apart += k_got[i] != kh[i];
        }
        EXPECT_LE(apart, kc_h.numel() / 100) << what << " k cache codes that differ";
        const uint8_t* vh = vc_h.data_as<uint8_t>();
        EXPECT_EQ(fetch<uint8_t>(vc_d), std::vector<uint8_t>(vh, vh + vc_h.numel())) << what << " v cache";
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
  gpu_->qkv_prepare(qkv, Tensor(), Tensor(), 1e-6f, table, static_cast<int32_t>(hd), {kc, vc}, batch, q);
  EXPECT_THROW(gpu_->synchronize(), Error);
}

// A decode step's qkv_attention on the fast backend runs qkv_prepare inside the flash kernel: the output and the cache
// must carry exactly the bits of qkv_prepare followed by attention (shared per-head code, the same bf16 roundings),
// whichever split holds the new key, with windows, sinks, partial rotary dims, groups of 1 to 16 and head_dim
// 64/128/256, on a bf16 and an fp8 cache. The fused path leaves q_scratch unwritten, which shows it was taken.
TEST_F(CudaParity, QkvAttentionDecodeFusesPrepareBitExactly) {
  struct Case {
    int32_t heads, kv_heads, head_dim, rotary_dim, window;
    bool norms, sinks;
    std::vector<int32_t> kv_len;  // per sequence, the new token included (position kv_len - 1)
  };
  const Case cases[] = {
      {32, 8, 128, 128, 0, true, false, {40, 700, 3000, 17}},  // Qwen3-8B: one split, a few, many (3000)
      {16, 8, 128, 128, 0, true, false, {1, 64, 65, 4097}},    // Qwen3-0.6B: first token, page/tile edges
      {64, 8, 64, 64, 128, false, true, {100, 129, 2000}},     // gpt-oss sliding layer: window, sinks
      {64, 8, 64, 64, 0, false, true, {5000}},                 // gpt-oss full layer, one long sequence
      {16, 2, 256, 64, 0, true, false, {300, 2100}},           // Qwen3-Next full attention: partial rotary
      {16, 1, 128, 128, 0, false, false, {900}},               // group of 16
      {4, 4, 128, 96, 0, true, false, {33, 1500}},             // MHA, partial rotary
  };
  const int32_t page_size = 16, max_pos = 8192;
  for (const DType cache_dtype : {DType::kBF16, DType::kF8E4M3})
    for (const Case& c : cases) {
      const int32_t seqs = static_cast<int32_t>(c.kv_len.size()), hd = c.head_dim;
      const int32_t max_len = *std::max_element(c.kv_len.begin(), c.kv_len.end());
      const int32_t max_pages = (max_len + page_size - 1) / page_size;
      int32_t total_pages = 0;
      for (int32_t len : c.kv_len) total_pages += (len + page_size - 1) / page_size;
      std::vector<int32_t> page_ids(total_pages);
      std::iota(page_ids.begin(), page_ids.end(), 0);
      std::shuffle(page_ids.begin(), page_ids.end(), rng_);
      std::vector<int32_t> table(seqs * max_pages, -1), pos, seq, slots, starts{0};
      for (int32_t s = 0, next = 0; s < seqs; ++s) {
        for (int32_t p = 0; p < (c.kv_len[s] + page_size - 1) / page_size; ++p)
          table[s * max_pages + p] = page_ids[next++];
        const int32_t last = c.kv_len[s] - 1;
        pos.push_back(last), seq.push_back(s), starts.push_back(s + 1);
        slots.push_back(table[s * max_pages + last / page_size] * page_size + last % page_size);
      }
      const int64_t cache_rows = int64_t{total_pages} * page_size, width = (c.heads + 2 * c.kv_heads) * int64_t{hd};
      const BatchView batch{dev(host(pos, DType::kI32, {seqs})),
                            dev(host(seq, DType::kI32, {seqs})),
                            dev(host(c.kv_len, DType::kI32, {seqs})),
                            dev(host(table, DType::kI32, {seqs, max_pages})),
                            dev(host(slots, DType::kI32, {seqs})),
                            page_size,
                            seqs,
                            max_len,
                            dev(host(starts, DType::kI32, {seqs + 1}))};
      // Earlier keys: random rows everywhere (the new tokens' rows too: the fused kernel must overwrite them).
      const bool fp8 = cache_dtype == DType::kF8E4M3;
      const auto random_cache = [&] {
        const std::vector<float> values = normal(rng_, cache_rows * c.kv_heads * hd);
        if (!fp8) return host(to_bf16(values), DType::kBF16, {cache_rows, c.kv_heads, hd});
        std::vector<uint8_t> codes(values.size());
        for (size_t i = 0; i < values.size(); ++i) codes[i] = f32_to_fp8_e4m3(values[i] * 4.0f);
        return host(codes, DType::kF8E4M3, {cache_rows, c.kv_heads, hd});
      };
      const Tensor k_old = random_cache(), v_old = random_cache();
      const float k_scale = fp8 ? 0.25f : 1.0f, v_scale = fp8 ? 0.25f : 1.0f;
      const Tensor qkv = dev(host(normal(rng_, seqs * width, 3.0f), DType::kF32, {seqs, width}));
      const Tensor rope =
          dev(host(normal(rng_, int64_t{max_pos} * c.rotary_dim), DType::kF32, {max_pos, c.rotary_dim}));
      const QkvNormRope prepare{c.norms ? dev(host(to_bf16(normal(rng_, hd)), DType::kBF16, {hd})) : Tensor(),
                                c.norms ? dev(host(to_bf16(normal(rng_, hd)), DType::kBF16, {hd})) : Tensor(), 1e-6f,
                                rope, c.rotary_dim};
      const Tensor sinks = c.sinks ? dev(host(normal(rng_, c.heads, 2.0f), DType::kF32, {c.heads})) : Tensor();
      const AttentionParams params{c.heads, c.kv_heads, hd, 1.0f / std::sqrt(float(hd)), c.window, sinks};
      const std::vector<float> sentinel(int64_t{seqs} * c.heads * hd, 1234.5f);

      Tensor kc_ref = dev(k_old), vc_ref = dev(v_old), kc = dev(k_old), vc = dev(v_old);
      Tensor q_ref = dev(host_zeros(DType::kF32, {seqs, c.heads, hd}));
      Tensor q_fused = dev(host(sentinel, DType::kF32, {seqs, c.heads, hd}));
      Tensor out_ref = dev(host_zeros(DType::kF32, {seqs, int64_t{c.heads} * hd}));
      Tensor out = dev(host_zeros(DType::kF32, {seqs, int64_t{c.heads} * hd}));
      gpu_->synchronize();
      const KvCache cache_ref{kc_ref, vc_ref, k_scale, v_scale}, cache{kc, vc, k_scale, v_scale};
      fast_->qkv_prepare(qkv, prepare.q_norm, prepare.k_norm, prepare.eps, rope, c.rotary_dim, cache_ref, batch, q_ref);
      fast_->attention(q_ref, cache_ref, batch, params, out_ref);
      fast_->qkv_attention(qkv, prepare, cache, batch, params, q_fused, out);
      fast_->synchronize();
      const std::string what =
          fmt::format("qkv_attention {}/{}x{} rot {} window {} sinks {} lens {} {}", c.heads, c.kv_heads, hd,
                      c.rotary_dim, c.window, c.sinks, fmt::join(c.kv_len, ","), dtype_name(cache_dtype));
      EXPECT_EQ(fetch<float>(q_fused), sentinel) << what << ": the fused path was not taken";
      if (fp8) {
        EXPECT_EQ(fetch<uint8_t>(kc), fetch<uint8_t>(kc_ref)) << what << " k cache";
        EXPECT_EQ(fetch<uint8_t>(vc), fetch<uint8_t>(vc_ref)) << what << " v cache";
      } else {
        EXPECT_EQ(fetch<uint16_t>(kc), fetch<uint16_t>(kc_ref)) << what << " k cache";
        EXPECT_EQ(fetch<uint16_t>(vc), fetch<uint16_t>(vc_ref)) << what << " v cache";
      }
      EXPECT_EQ(fetch<float>(out), fetch<float>(out_ref)) << what << " output";
      std::printf("  %-48s bit-identical: %s\n", what.c_str(), ::testing::Test::HasFailure() ? "no" : "yes");
    }
}

TEST_F(CudaParity, QkvAttentionDecodeFlagsBadPositions) {
  const int64_t hd = 64, width = 3 * hd;
  const Tensor qkv = dev(host(normal(rng_, width), DType::kF32, {1, width}));
  const Tensor table = dev(host(normal(rng_, 4 * hd), DType::kF32, {4, hd}));
  const auto i32 = [&](std::vector<int32_t> v) { return dev(host(v, DType::kI32, {int64_t(v.size())})); };
  const BatchView batch{i32({4}),   i32({0}), i32({5}), dev(host(std::vector<int32_t>{0}, DType::kI32, {1, 1})),
                        i32({4}),   16,       1,        5,
                        i32({0, 1})};
  Tensor kc = dev(host_zeros(DType::kBF16, {16, 1, hd})), vc = dev(host_zeros(DType::kBF16, {16, 1, hd}));
  Tensor q = dev(host_zeros(DType::kF32, {1, 1, hd})), out = dev(host_zeros(DType::kF32, {1, hd}));
  gpu_->synchronize();
  fast_->qkv_attention(qkv, QkvNormRope{Tensor(), Tensor(), 1e-6f, table, static_cast<int32_t>(hd)}, {kc, vc}, batch,
                       AttentionParams{1, 1, static_cast<int32_t>(hd), 0.125f, 0, Tensor()}, q, out);
  EXPECT_THROW(fast_->synchronize(), Error);
}

}  // namespace
}  // namespace rs::cuda_test
