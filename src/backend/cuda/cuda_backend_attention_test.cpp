// Parity of the CUDA K/V store and paged attention (prefill, decode, mixed batches; windows; sinks; key splits for
// long contexts) with the CPU reference backend on random inputs, for both kernels: CUDA cores (the exact backend) and
// tensor cores (flash_attention.cu: the fast backend on a bf16 or fp8 cache; 64-row tiles for decode and head_dim
// 64 / 256, 128-row tiles for head_dim 128 prefill). An fp8 cache is stored with per-tensor scales other than 1.
#include "backend/cuda/parity_test_util.h"

namespace rs::cuda_test {
namespace {

struct AttentionCase {
  int32_t heads, kv_heads, head_dim;
  std::vector<int32_t> kv_len;   // per sequence
  std::vector<int32_t> new_len;  // query tokens per sequence (the last positions)
};

TEST_F(CudaParity, StoreKvAndAttention) {
  const int32_t page_size = 16;
  const AttentionCase cases[] = {
      {4, 2, 16, {37, 300, 5}, {37, 1, 5}},  // mixed prefill/decode, tiny head
      {8, 1, 64, {130, 64}, {3, 64}},        // MQA
      {4, 2, 80, {50}, {50}},                // head_dim not a multiple of 32
      {4, 4, 128, {3000, 1500}, {1, 1}},     // long decode: key splits
      // Qwen3-8B-like GQA: a chunk after a prefix that ends mid-page, a chunk after a page-aligned prefix, a decode row
      {32, 8, 128, {700, 133, 40}, {300, 70, 1}},
      {64, 8, 64, {300, 90}, {300, 90}},        // gpt-oss-like: 8 query heads per KV head, whole prompts
      {16, 8, 128, {1200}, {1200}},             // Qwen3-0.6B-like: 64 tokens per tile, many key tiles
      {64, 8, 64, {500, 77, 3000}, {1, 1, 1}},  // gpt-oss-like decode rows
      // Qwen3.5 / Qwen3-Next full attention (head_dim 256, 8 query heads per KV head): prefill chunks beside a decode
      // row, then long decode rows (key splits)
      {16, 2, 256, {700, 133, 40}, {300, 70, 1}},
      {16, 2, 256, {3000, 90}, {1, 1}},
      // Mixed steps as the scheduler orders them, decode rows first: long decode rows beside prefill chunks whose few
      // tiles split their keys, for Qwen3-8B, gpt-oss and head_dim 256 shapes
      {32, 8, 128, {3000, 133, 700, 900}, {1, 1, 300, 70}},
      {64, 8, 64, {3000, 500, 300}, {1, 1, 300}},
      {16, 2, 256, {3000, 700, 133}, {1, 300, 70}},
      {32, 8, 128, {40, 2000}, {1, 37}},  // a chunk shorter than one 128-row tile
  };
  for (const DType cache_dtype : {DType::kF32, DType::kBF16, DType::kF8E4M3})
    for (const AttentionCase& c : cases) {
      const int32_t seqs = static_cast<int32_t>(c.kv_len.size());
      const int32_t max_len = *std::max_element(c.kv_len.begin(), c.kv_len.end());
      const int32_t max_pages = (max_len + page_size - 1) / page_size;
      // Pages of all sequences, shuffled; unused table entries stay -1.
      int32_t total_pages = 0;
      for (int32_t len : c.kv_len) total_pages += (len + page_size - 1) / page_size;
      std::vector<int32_t> page_ids(total_pages);
      std::iota(page_ids.begin(), page_ids.end(), 0);
      std::shuffle(page_ids.begin(), page_ids.end(), rng_);
      std::vector<int32_t> table(seqs * max_pages, -1);
      for (int32_t s = 0, next = 0; s < seqs; ++s)
        for (int32_t p = 0; p < (c.kv_len[s] + page_size - 1) / page_size; ++p)
          table[s * max_pages + p] = page_ids[next++];
      // Store every position of every sequence, then attend from the last new_len positions of each.
      std::vector<int32_t> all_pos, all_seq, all_slots, q_pos, q_seq, q_slots;
      for (int32_t s = 0; s < seqs; ++s)
        for (int32_t p = 0; p < c.kv_len[s]; ++p) {
          const int32_t slot = table[s * max_pages + p / page_size] * page_size + p % page_size;
          all_pos.push_back(p), all_seq.push_back(s), all_slots.push_back(slot);
          if (p >= c.kv_len[s] - c.new_len[s]) q_pos.push_back(p), q_seq.push_back(s), q_slots.push_back(slot);
        }
      const int64_t all_tokens = all_pos.size(), tokens = q_pos.size();
      const int64_t kv_width = int64_t{c.kv_heads} * c.head_dim, cache_rows = int64_t{total_pages} * page_size;
      auto make_batch = [&](const Tensor& pos, const Tensor& seq, const Tensor& slots, bool device,
                            const std::vector<int32_t>& seq_of) {
        const Tensor len = host(c.kv_len, DType::kI32, {seqs});
        const Tensor tab = host(table, DType::kI32, {seqs, max_pages});
        std::vector<int32_t> starts(1, 0);  // tokens of pos/seq are grouped by sequence
        for (int32_t s = 0, t = 0; s < seqs; ++s) {
          while (t < static_cast<int32_t>(seq_of.size()) && seq_of[t] == s) ++t;
          starts.push_back(t);
        }
        const Tensor start = host(starts, DType::kI32, {seqs + 1});
        return BatchView{pos,  seq,     device ? dev(len) : len,    device ? dev(tab) : tab, slots, page_size,
                         seqs, max_len, device ? dev(start) : start};
      };
      const Tensor ap = host(all_pos, DType::kI32, {all_tokens}), as = host(all_seq, DType::kI32, {all_tokens}),
                   asl = host(all_slots, DType::kI32, {all_tokens});
      const BatchView store_h = make_batch(ap, as, asl, false, all_seq);
      const BatchView store_d = make_batch(dev(ap), dev(as), dev(asl), true, all_seq);
      const Tensor k = host(normal(rng_, all_tokens * kv_width), DType::kF32, {all_tokens, c.kv_heads, c.head_dim});
      const Tensor v = host(normal(rng_, all_tokens * kv_width), DType::kF32, {all_tokens, c.kv_heads, c.head_dim});
      Tensor kc_h = host_zeros(cache_dtype, {cache_rows, c.kv_heads, c.head_dim});
      Tensor vc_h = host_zeros(cache_dtype, {cache_rows, c.kv_heads, c.head_dim});
      Tensor kc_d = dev(kc_h), vc_d = dev(vc_h);
      const float k_scale = cache_dtype == DType::kF8E4M3 ? 0.25f : 1.0f;
      const float v_scale = cache_dtype == DType::kF8E4M3 ? 0.125f : 1.0f;
      const KvCache cache_h{kc_h, vc_h, k_scale, v_scale}, cache_d{kc_d, vc_d, k_scale, v_scale};
      cpu_->store_kv(k, v, cache_h, store_h);
      gpu_->store_kv(dev(k), dev(v), cache_d, store_d);
      if (cache_dtype == DType::kF32) {
        EXPECT_PARITY(fetch<float>(kc_d), as_floats(kc_h), kExact, "store_kv k");
        EXPECT_PARITY(fetch<float>(vc_d), as_floats(vc_h), kExact, "store_kv v");
      } else if (cache_dtype == DType::kF8E4M3) {  // both divide by the scale and round to nearest, saturated
        const uint8_t* kh = kc_h.data_as<uint8_t>();
        const uint8_t* vh = vc_h.data_as<uint8_t>();
        EXPECT_EQ(fetch<uint8_t>(kc_d), std::vector<uint8_t>(kh, kh + kc_h.numel())) << "store_kv k (fp8)";
        EXPECT_EQ(fetch<uint8_t>(vc_d), std::vector<uint8_t>(vh, vh + vc_h.numel())) << "store_kv v (fp8)";
      } else {  // both round to nearest even: identical bits
        const uint16_t* kh = kc_h.data_as<uint16_t>();
        const uint16_t* vh = vc_h.data_as<uint16_t>();
        EXPECT_EQ(fetch<uint16_t>(kc_d), std::vector<uint16_t>(kh, kh + kc_h.numel())) << "store_kv k (bf16)";
        EXPECT_EQ(fetch<uint16_t>(vc_d), std::vector<uint16_t>(vh, vh + vc_h.numel())) << "store_kv v (bf16)";
      }

      // fp8: the cache's exact dequantization as a bf16 cache (code x a power-of-two scale is a bf16 value).
      Tensor kc_deq, vc_deq;
      if (cache_dtype == DType::kF8E4M3) {
        const auto dequantized = [&](const Tensor& codes, float scale) {
          std::vector<uint16_t> bits(codes.numel());
          for (int64_t i = 0; i < codes.numel(); ++i)
            bits[i] = f32_to_bf16(fp8_e4m3_to_f32(codes.data_as<uint8_t>()[i]) * scale);
          return dev(host(bits, DType::kBF16, {cache_rows, c.kv_heads, c.head_dim}));
        };
        kc_deq = dequantized(kc_h, k_scale), vc_deq = dequantized(vc_h, v_scale);
      }
      const Tensor qp = host(q_pos, DType::kI32, {tokens}), qs = host(q_seq, DType::kI32, {tokens}),
                   qsl = host(q_slots, DType::kI32, {tokens});
      const BatchView batch_h = make_batch(qp, qs, qsl, false, q_seq);
      const BatchView batch_d = make_batch(dev(qp), dev(qs), dev(qsl), true, q_seq);
      const Tensor q = host(normal(rng_, tokens * c.heads * c.head_dim), DType::kF32, {tokens, c.heads, c.head_dim});
      const Tensor q_d = dev(q);
      const auto sink_values = normal(rng_, c.heads, 2.0f);
      for (int32_t window : {0, 7, 100, 1000}) {
        for (int sink_mode = 0; sink_mode < 3; ++sink_mode) {
          const Tensor sinks = sink_mode == 0   ? Tensor()
                               : sink_mode == 1 ? host(sink_values, DType::kF32, {c.heads})
                                                : host(to_bf16(sink_values), DType::kBF16, {c.heads});
          const float scale = 1.0f / std::sqrt(float(c.head_dim));
          Tensor ref = host_zeros(DType::kF32, {tokens, int64_t{c.heads} * c.head_dim});
          cpu_->attention(q, cache_h, batch_h, AttentionParams{c.heads, c.kv_heads, c.head_dim, scale, window, sinks},
                          ref);
          Tensor out = dev(host_zeros(DType::kF32, {tokens, int64_t{c.heads} * c.head_dim}));
          gpu_->attention(q_d, cache_d, batch_d,
                          AttentionParams{c.heads, c.kv_heads, c.head_dim, scale, window, dev(sinks)}, out);
          const std::string what =
              fmt::format("attention h={}/{} hd={} max_len={} T={} window={} sinks={} cache={}", c.heads, c.kv_heads,
                          c.head_dim, max_len, tokens, window, sink_mode, dtype_name(cache_dtype));
          // A bf16 cache rounds q and the probabilities to bf16 on both backends, each at its own running max. An fp8
          // cache computes in f32 on the dequantized cache on the CPU and the CUDA cores; the tensor cores (fast
          // backend) round q and the probabilities to bf16.
          const double tolerance = cache_dtype == DType::kBF16 ? kAttentionBf16 : kAttention;
          // With an fp8 cache only the tensor cores round q (bf16 caches round it on both sides), hence twice the
          // bf16 tolerance against the CPU; the bit-exact check below pins the kernel itself.
          const double fast_tolerance = cache_dtype == DType::kF32    ? kAttention
                                        : cache_dtype == DType::kBF16 ? kAttentionBf16
                                                                      : 2 * kAttentionBf16;
          EXPECT_PARITY(fetch<float>(out), as_floats(ref), tolerance, what);
          Tensor out_fast = dev(host_zeros(DType::kF32, {tokens, int64_t{c.heads} * c.head_dim}));
          gpu_->synchronize();  // the fast backend runs on its own stream
          fast_->attention(q_d, cache_d, batch_d,
                           AttentionParams{c.heads, c.kv_heads, c.head_dim, scale, window, dev(sinks)}, out_fast);
          fast_->synchronize();
          EXPECT_PARITY(fetch<float>(out_fast), as_floats(ref), fast_tolerance, what + " (fast backend)");
          const bool tensor_cores = c.head_dim == 64 || c.head_dim == 128 || c.head_dim == 256;
          // Decode steps of groups up to 16 read an fp8 cache with f16 operands (flash_decode_fp8.cu): only the
          // tolerance above applies to them. Every other step widens the codes to bf16 tiles.
          const bool fp8_decode = tokens == seqs && c.heads / c.kv_heads <= 16;
          if (cache_dtype == DType::kF8E4M3 && tensor_cores && !fp8_decode) {
            // The scales are powers of two, so code x scale is exact in bf16 and scaling commutes with every
            // rounding: the tensor cores over the fp8 cache must give the bits they give over its bf16 dequantization.
            Tensor out_bf16 = dev(host_zeros(DType::kF32, {tokens, int64_t{c.heads} * c.head_dim}));
            fast_->attention(q_d, KvCache{kc_deq, vc_deq}, batch_d,
                             AttentionParams{c.heads, c.kv_heads, c.head_dim, scale, window, dev(sinks)}, out_bf16);
            fast_->synchronize();
            EXPECT_EQ(fetch<float>(out_fast), fetch<float>(out_bf16)) << what << ": fp8 vs its bf16 dequantization";
          } else if (cache_dtype == DType::kF8E4M3 && tensor_cores) {
            // f16 q and probabilities (11 significant bits) must land at least as close to the f32 reference as the
            // bf16 kernel (8 bits) over the same cache dequantized to bf16.
            Tensor out_bf16 = dev(host_zeros(DType::kF32, {tokens, int64_t{c.heads} * c.head_dim}));
            fast_->attention(q_d, KvCache{kc_deq, vc_deq}, batch_d,
                             AttentionParams{c.heads, c.kv_heads, c.head_dim, scale, window, dev(sinks)}, out_bf16);
            fast_->synchronize();
            const double f16_err = normalized_error(fetch<float>(out_fast), as_floats(ref));
            const double bf16_err = normalized_error(fetch<float>(out_bf16), as_floats(ref));
            std::printf("  %s: fp8 decode (f16 operands) err %.2e, bf16 kernel err %.2e\n", what.c_str(), f16_err,
                        bf16_err);
            EXPECT_LE(f16_err, bf16_err) << what << ": fp8 decode less accurate than the bf16 kernel";
          }
        }
      }
    }
}

}  // namespace
}  // namespace rs::cuda_test
