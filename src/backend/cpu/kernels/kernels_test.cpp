// CPU kernel tests against naive references written out longhand here.
#include "backend/cpu/kernels/kernels.h"
#include "backend/cpu/kernels/gemm_bf16.h"
#include "backend/cpu/kernels/vec.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <random>
#include <vector>

namespace rs::cpu {
namespace {

std::vector<float> random_vector(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// A vocabulary shard (tensor parallelism): its rows for its ids, zeros for the others' ids, errors past the vocabulary.
TEST(CpuKernels, EmbeddingShardOfTheVocabulary) {
  ThreadPool pool(2);
  std::vector<float> rows = {1, 2, 3, 4, 5, 6};  // ids 2 and 3 of a 6-id vocabulary, 3 wide
  const Tensor table(rows.data(), DType::kF32, {2, 3});
  std::vector<int32_t> ids = {0, 2, 3, 5};
  std::vector<float> out(12, -1.0f);
  embedding(pool, table, Tensor(ids.data(), DType::kI32, {4}), Tensor(out.data(), DType::kF32, {4, 3}), 2, 6);
  EXPECT_EQ(out, (std::vector<float>{0, 0, 0, 1, 2, 3, 4, 5, 6, 0, 0, 0}));
  ids = {6};
  EXPECT_THROW(
      embedding(pool, table, Tensor(ids.data(), DType::kI32, {1}), Tensor(out.data(), DType::kF32, {1, 3}), 2, 6),
      Error);
}

TEST(CpuKernels, LinearBf16MatchesNaiveForAllBatchSizes) {
  ThreadPool pool(2);
  for (auto [in, out] : {std::pair<int64_t, int64_t>{96, 40}, {100, 43}}) {  // 100, 43: ragged inputs and row blocks
    auto w32 = random_vector(in * out, 1);
    std::vector<uint16_t> w16(w32.size());
    for (size_t i = 0; i < w32.size(); ++i) {
      w16[i] = f32_to_bf16(w32[i]);
      w32[i] = bf16_to_f32(w16[i]);
    }
    auto bias = random_vector(out, 3);
    for (int64_t tokens : {1, 2, 3, 4, 7}) {
      auto x = random_vector(tokens * in, 2);
      std::vector<float> got(tokens * out);
      LinearWeight w{LinearWeight::Format::kDense, Tensor(w16.data(), DType::kBF16, {out, in}), Tensor(), out, in};
      linear(pool, Tensor(x.data(), DType::kF32, {tokens, in}), w, Tensor(bias.data(), DType::kF32, {out}),
             Tensor(got.data(), DType::kF32, {tokens, out}));
      for (int64_t t = 0; t < tokens; ++t)
        for (int64_t o = 0; o < out; ++o) {
          double ref = bias[o];
          for (int64_t i = 0; i < in; ++i) ref += static_cast<double>(x[t * in + i]) * w32[o * in + i];
          EXPECT_NEAR(got[t * out + o], ref, 1e-4) << in << "x" << out << ": " << tokens << " " << t << " " << o;
        }
    }
  }
}

TEST(CpuKernels, Mxfp4DecodesLowNibbleFirstWithE8M0Scale) {
  ThreadPool pool(1);
  // One row, 32 inputs: byte k holds element 2k (low nibble) and 2k+1 (high nibble).
  std::vector<uint8_t> blocks(16, 0);
  blocks[0] = 0x72;                     // element 0 = code 2 (1.0), element 1 = code 7 (6.0)
  blocks[1] = 0x0A;                     // element 2 = code 10 (-1.0)
  std::vector<uint8_t> scales = {128};  // 2^(128-127) = 2
  LinearWeight w{LinearWeight::Format::kMxfp4, Tensor(blocks.data(), DType::kU8, {1, 1, 16}),
                 Tensor(scales.data(), DType::kU8, {1, 1}), 1, 32};
  std::vector<float> x(32, 0.0f);
  x[0] = 1.0f, x[1] = 10.0f, x[2] = 100.0f;
  float y = 0.0f;
  linear(pool, Tensor(x.data(), DType::kF32, {1, 32}), w, Tensor(), Tensor(&y, DType::kF32, {1, 1}));
  EXPECT_FLOAT_EQ(y, 2.0f * (1.0f + 60.0f - 100.0f));
}

// Naive attention over a contiguous sequence, with window and sinks; without causality query i sees every key of the
// sequence (the window still counts back from i).
std::vector<float> naive_attention(const std::vector<float>& q, const std::vector<float>& k,
                                   const std::vector<float>& v, int len, int heads, int kv_heads, int hd, float scale,
                                   int window, const std::vector<float>& sinks, bool causal = true) {
  std::vector<float> out(len * heads * hd, 0.0f);
  for (int i = 0; i < len; ++i)
    for (int h = 0; h < heads; ++h) {
      const int kvh = h / (heads / kv_heads);
      std::vector<double> s;
      const int last = causal ? i : len - 1;
      for (int j = 0; j <= last; ++j) {
        if (window > 0 && j <= i - window) {
          s.push_back(-INFINITY);
          continue;
        }
        double dot = 0;
        for (int d = 0; d < hd; ++d) dot += q[(i * heads + h) * hd + d] * k[(j * kv_heads + kvh) * hd + d];
        s.push_back(dot * scale);
      }
      double m = sinks.empty() ? -INFINITY : sinks[h];
      for (double x : s) m = std::max(m, x);
      double denom = sinks.empty() ? 0.0 : std::exp(sinks[h] - m);
      for (double& x : s) denom += (x = std::exp(x - m));
      for (int j = 0; j <= last; ++j)
        for (int d = 0; d < hd; ++d) out[(i * heads + h) * hd + d] += s[j] / denom * v[(j * kv_heads + kvh) * hd + d];
    }
  return out;
}

// Sequences of different lengths in one batch, each with K/V for its whole context in shuffled pages, and only the
// last `queries` positions of each asking (a chunked prefill, a decode token, ...). head_dim 8 takes the row-wise
// kernel; multiples of 16 the blocked one (bf16 products over a bf16 cache where AVX512-BF16 exists).
struct AttentionCase {
  int heads, kv_heads, hd;
  std::vector<std::pair<int, int>> seqs;  // (context length, queries)
  // bf16: the reference sees K/V rounded as the cache holds them, and q rounded as the bf16 products take it; the
  // kernel also rounds the probabilities (to bf16: ~0.2%), hence the looser tolerance.
  // fp8: the reference sees K/V as the cache holds them (e4m3 code x per-tensor scale); the kernel computes in f32.
  DType cache_dtype = DType::kF32;
  int page_size = 4;
  float scale = 0.3f;  // large scales give peaked scores whose running maximum moves between key blocks
  float k_scale = 0.05f, v_scale = 0.02f;  // fp8 only
  bool causal = true;  // false: each query sees all of its sequence's keys (AttentionParams::causal)
};

void check_paged_attention(const AttentionCase& c) {
  ThreadPool pool(2);
  const int page_size = c.page_size, kv_heads = c.kv_heads, heads = c.heads, hd = c.hd;
  int max_pages = 0, total_pages = 0, total_queries = 0;
  for (auto [len, queries] : c.seqs) {
    max_pages = std::max(max_pages, (len + page_size - 1) / page_size);
    total_pages += (len + page_size - 1) / page_size;
    total_queries += queries;
  }
  std::vector<float> kc(total_pages * page_size * kv_heads * hd), vc(kc.size());
  std::vector<int32_t> table(c.seqs.size() * max_pages, -1), kv_len;
  std::vector<int32_t> positions, seq_of, slots;
  std::vector<float> q_batch;
  std::vector<std::vector<float>> qs, ks, vs;
  std::vector<float> sinks;
  // One head in three has a sink far above its scores (its output then nearly vanishes: relative errors grow).
  for (int h = 0; h < heads; ++h) sinks.push_back(h % 3 == 2 ? 6.0f : 0.7f * static_cast<float>(h % 3) - 0.5f);
  int next_page = 0;
  for (size_t s = 0; s < c.seqs.size(); ++s) {
    const auto [len, queries] = c.seqs[s];
    const int pages = (len + page_size - 1) / page_size;
    int stride = 7;  // p -> (p * stride + 3) % pages shuffles only with a stride coprime to the page count
    while (std::gcd(stride, pages) != 1) ++stride;
    for (int p = 0; p < pages; ++p) table[s * max_pages + p] = next_page + (p * stride + 3) % pages;
    next_page += pages;
    qs.push_back(random_vector(len * heads * hd, 100 + s));
    ks.push_back(random_vector(len * kv_heads * hd, 200 + s));
    vs.push_back(random_vector(len * kv_heads * hd, 300 + s));
    if (c.cache_dtype == DType::kBF16)
      for (auto* values : {&qs.back(), &ks.back(), &vs.back()})
        for (float& x : *values) x = bf16_to_f32(f32_to_bf16(x));
    if (c.cache_dtype == DType::kF8E4M3) {
      for (float& x : ks.back()) x = fp8_e4m3_to_f32(f32_to_fp8_e4m3(x / c.k_scale)) * c.k_scale;
      for (float& x : vs.back()) x = fp8_e4m3_to_f32(f32_to_fp8_e4m3(x / c.v_scale)) * c.v_scale;
    }
    for (int i = 0; i < len; ++i) {
      const int slot = table[s * max_pages + i / page_size] * page_size + i % page_size;
      std::copy_n(ks[s].begin() + i * kv_heads * hd, kv_heads * hd, kc.begin() + slot * kv_heads * hd);
      std::copy_n(vs[s].begin() + i * kv_heads * hd, kv_heads * hd, vc.begin() + slot * kv_heads * hd);
      if (i >= len - queries) {
        positions.push_back(i), seq_of.push_back(static_cast<int32_t>(s)), slots.push_back(slot);
        q_batch.insert(q_batch.end(), qs[s].begin() + i * heads * hd, qs[s].begin() + (i + 1) * heads * hd);
      }
    }
    kv_len.push_back(len);
  }
  BatchView batch{Tensor(positions.data(), DType::kI32, {total_queries}),
                  Tensor(seq_of.data(), DType::kI32, {total_queries}),
                  Tensor(kv_len.data(), DType::kI32, {static_cast<int64_t>(kv_len.size())}),
                  Tensor(table.data(), DType::kI32, {static_cast<int64_t>(c.seqs.size()), max_pages}),
                  Tensor(slots.data(), DType::kI32, {total_queries}),
                  page_size,
                  static_cast<int32_t>(c.seqs.size()),
                  *std::max_element(kv_len.begin(), kv_len.end())};
  Tensor kc_t(kc.data(), DType::kF32, {total_pages * page_size, kv_heads, hd});
  Tensor vc_t(vc.data(), DType::kF32, {total_pages * page_size, kv_heads, hd});
  std::vector<uint16_t> kc_bf16(kc.size()), vc_bf16(vc.size());
  if (c.cache_dtype == DType::kBF16) {
    for (size_t i = 0; i < kc.size(); ++i) kc_bf16[i] = f32_to_bf16(kc[i]), vc_bf16[i] = f32_to_bf16(vc[i]);
    kc_t = Tensor(kc_bf16.data(), DType::kBF16, {total_pages * page_size, kv_heads, hd});
    vc_t = Tensor(vc_bf16.data(), DType::kBF16, {total_pages * page_size, kv_heads, hd});
  }
  std::vector<uint8_t> kc_fp8(kc.size()), vc_fp8(vc.size());
  if (c.cache_dtype == DType::kF8E4M3) {
    for (size_t i = 0; i < kc.size(); ++i)
      kc_fp8[i] = f32_to_fp8_e4m3(kc[i] / c.k_scale), vc_fp8[i] = f32_to_fp8_e4m3(vc[i] / c.v_scale);
    kc_t = Tensor(kc_fp8.data(), DType::kF8E4M3, {total_pages * page_size, kv_heads, hd});
    vc_t = Tensor(vc_fp8.data(), DType::kF8E4M3, {total_pages * page_size, kv_heads, hd});
  }
  const KvCache cache{kc_t, vc_t, c.k_scale, c.v_scale};
  for (bool use_sinks : {false, true})
    for (int window : {0, 1, 5, 37}) {
      AttentionParams params{heads,   kv_heads, hd,
                             c.scale, window,   use_sinks ? Tensor(sinks.data(), DType::kF32, {heads}) : Tensor()};
      params.causal = c.causal;
      std::vector<float> got(total_queries * heads * hd);
      attention(pool, Tensor(q_batch.data(), DType::kF32, {total_queries, heads, hd}), cache, batch, params,
                Tensor(got.data(), DType::kF32, {total_queries, heads * hd}));
      int row = 0;
      for (size_t s = 0; s < c.seqs.size(); ++s) {
        const auto [len, queries] = c.seqs[s];
        auto ref = naive_attention(qs[s], ks[s], vs[s], len, heads, kv_heads, hd, c.scale, window,
                                   use_sinks ? sinks : std::vector<float>{}, c.causal);
        for (int i = len - queries; i < len; ++i, ++row)
          for (int j = 0; j < heads * hd; ++j)
            ASSERT_NEAR(got[row * heads * hd + j], ref[i * heads * hd + j], c.cache_dtype == DType::kBF16 ? 6e-3 : 2e-5)
                << "hd " << hd << " group " << heads / kv_heads << " seq " << s << " position " << i << " window "
                << window << " sinks " << use_sinks;
      }
    }
}

TEST(CpuKernels, PagedAttentionMatchesNaiveWithWindowAndSinks) {
  for (DType cache : {DType::kF32, DType::kBF16, DType::kF8E4M3})
    for (int hd : {8, 32, 64, 128})
      for (auto [heads, kv_heads] : {std::pair{4, 4}, {4, 2}, {8, 2}}) {
        check_paged_attention({heads, kv_heads, hd, {{37, 37}}, cache});                           // prefill
        check_paged_attention({heads, kv_heads, hd, {{70, 7}, {45, 1}, {3, 3}, {90, 1}}, cache});  // chunk + decodes
      }
  // gpt-oss and Qwen3-Next shapes (8 query heads per KV head; head_dim 256), pages of 16, peaked scores.
  for (DType cache : {DType::kF32, DType::kBF16, DType::kF8E4M3}) {
    check_paged_attention({16, 2, 64, {{100, 100}, {130, 1}}, cache, 16, 1.0f});
    check_paged_attention({4, 1, 256, {{50, 50}, {70, 2}}, cache, 16, 0.5f});
  }
}

// A step that sees all of its sequence's keys (a block-diffusion drafter's block, issue 43): each query of the last
// `queries` positions attends to every key up to the sequence's end, the later tokens of its step included.
TEST(CpuKernels, PagedAttentionWithoutCausalitySeesTheWholeStep) {
  for (DType cache : {DType::kF32, DType::kBF16, DType::kF8E4M3})
    for (int hd : {8, 32, 64, 128})
      for (auto [heads, kv_heads] : {std::pair{4, 4}, {8, 2}}) {
        AttentionCase c{heads, kv_heads, hd, {{37, 16}, {20, 20}, {45, 1}, {70, 7}}, cache};
        c.causal = false;
        check_paged_attention(c);
      }
  for (DType cache : {DType::kF32, DType::kBF16}) {
    AttentionCase c{4, 1, 256, {{50, 16}, {16, 16}}, cache, 16, 0.5f};
    c.causal = false;
    check_paged_attention(c);
  }
}

// A token's attention output must not depend on which other tokens share its step (a decode step alone, the end of a
// chunked prefill, ...): the scheduler's greedy-consistency guarantees rest on it. Bitwise, for both cache types.
TEST(CpuKernels, PagedAttentionIsBatchInvariant) {
  ThreadPool pool(2);
  const int len = 70, heads = 4, kv_heads = 2, hd = 64, page_size = 4, pages = (len + page_size - 1) / page_size;
  auto q = random_vector(len * heads * hd, 41), k = random_vector(len * kv_heads * hd, 42),
       v = random_vector(len * kv_heads * hd, 43);
  std::vector<int32_t> table(pages), positions(len), seq(len, 0), slots(len), kv_len = {len};
  for (int p = 0; p < pages; ++p) table[p] = (p * 5 + 2) % pages;
  for (int i = 0; i < len; ++i) positions[i] = i, slots[i] = table[i / page_size] * page_size + i % page_size;
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF8E4M3}) {
    std::vector<float> kc(pages * page_size * kv_heads * hd), vc(kc.size());
    std::vector<uint16_t> kc16(kc.size()), vc16(kc.size());
    std::vector<uint8_t> kc8(kc.size()), vc8(kc.size());
    const auto storage = [&](std::vector<float>& f32, std::vector<uint16_t>& b16, std::vector<uint8_t>& b8) -> void* {
      return dtype == DType::kF32    ? static_cast<void*>(f32.data())
             : dtype == DType::kBF16 ? static_cast<void*>(b16.data())
                                     : static_cast<void*>(b8.data());
    };
    Tensor kc_t(storage(kc, kc16, kc8), dtype, {pages * page_size, kv_heads, hd});
    Tensor vc_t(storage(vc, vc16, vc8), dtype, {pages * page_size, kv_heads, hd});
    BatchView all{Tensor(positions.data(), DType::kI32, {len}),
                  Tensor(seq.data(), DType::kI32, {len}),
                  Tensor(kv_len.data(), DType::kI32, {1}),
                  Tensor(table.data(), DType::kI32, {1, pages}),
                  Tensor(slots.data(), DType::kI32, {len}),
                  page_size,
                  1,
                  len};
    store_kv(Tensor(k.data(), DType::kF32, {len, kv_heads, hd}), Tensor(v.data(), DType::kF32, {len, kv_heads, hd}),
             {kc_t, vc_t}, all);
    for (int window : {0, 37}) {
      const AttentionParams params{heads, kv_heads, hd, 0.125f, window, Tensor()};
      // The last token's output as the last of the last `queries` tokens.
      auto last_row = [&](int queries) {
        const int first = len - queries;
        BatchView b{Tensor(positions.data() + first, DType::kI32, {queries}),
                    Tensor(seq.data(), DType::kI32, {queries}),
                    all.seq_kv_len,
                    all.page_table,
                    Tensor(slots.data() + first, DType::kI32, {queries}),
                    page_size,
                    1,
                    len};
        std::vector<float> out(queries * heads * hd);
        attention(pool, Tensor(q.data() + first * heads * hd, DType::kF32, {queries, heads, hd}), {kc_t, vc_t}, b,
                  params, Tensor(out.data(), DType::kF32, {queries, heads * hd}));
        return std::vector<float>(out.end() - heads * hd, out.end());
      };
      const auto alone = last_row(1);
      for (int queries : {2, 7, 16, 70})
        EXPECT_EQ(last_row(queries), alone) << dtype_name(dtype) << " window " << window << " queries " << queries;
    }
  }
}

TEST(CpuKernels, ScatterRowsFillsAColumnBlockAndSkipsNegativeRows) {
  std::vector<float> x = {1, 2, 3, 4, 5, 6};  // [3, 2]
  std::vector<int32_t> rows = {2, -1, 0};
  std::vector<float> out(3 * 5, -1.0f);  // [3, 5], the block at column 1
  scatter_rows(Tensor(x.data(), DType::kF32, {3, 2}), Tensor(rows.data(), DType::kI32, {3}),
               Tensor(out.data(), DType::kF32, {3, 5}), 1);
  EXPECT_EQ(out, (std::vector<float>{-1, 5, 6, -1, -1, -1, -1, -1, -1, -1, -1, 1, 2, -1, -1}));
}

TEST(CpuKernels, StoreKvRoundsIntoABf16Cache) {
  const int tokens = 3, kv_heads = 2, hd = 8;
  auto k = random_vector(tokens * kv_heads * hd, 21), v = random_vector(tokens * kv_heads * hd, 22);
  std::vector<uint16_t> kc(4 * kv_heads * hd, 0), vc(kc.size(), 0);
  std::vector<int32_t> slots = {2, -1, 0}, positions = {0, 1, 2}, seq = {0, 0, 0};
  BatchView batch{Tensor(positions.data(), DType::kI32, {tokens}),
                  Tensor(seq.data(), DType::kI32, {tokens}),
                  Tensor(),
                  Tensor(),
                  Tensor(slots.data(), DType::kI32, {tokens}),
                  4,
                  1,
                  tokens};
  store_kv(Tensor(k.data(), DType::kF32, {tokens, kv_heads, hd}), Tensor(v.data(), DType::kF32, {tokens, kv_heads, hd}),
           {Tensor(kc.data(), DType::kBF16, {4, kv_heads, hd}), Tensor(vc.data(), DType::kBF16, {4, kv_heads, hd})},
           batch);
  const int row = kv_heads * hd;
  for (int i = 0; i < row; ++i) {
    EXPECT_EQ(kc[2 * row + i], f32_to_bf16(k[i]));            // token 0 -> slot 2
    EXPECT_EQ(vc[0 * row + i], f32_to_bf16(v[2 * row + i]));  // token 2 -> slot 0
    EXPECT_EQ(kc[1 * row + i], 0);                            // token 1 (slot -1) wrote nothing
  }
}

// The vectorized fp8 row conversions give the scalar functions' codes and values for every kind of input: random bit
// patterns (NaN, infinities, subnormals included), every midpoint between neighbouring e4m3 values (ties go to even)
// and one f32 step either side of it, values past 448, and signed zeros.
TEST(CpuKernels, Fp8RowConversionsMatchTheScalarOnes) {
  std::vector<float> values;
  std::mt19937 rng(7);
  for (int i = 0; i < 100000; ++i) {
    uint32_t bits = static_cast<uint32_t>(rng());
    float x;
    std::memcpy(&x, &bits, 4);
    values.push_back(x);
    values.push_back(std::ldexp(static_cast<float>(rng() % 1000000) / 1e6f, static_cast<int>(rng() % 24) - 14));
  }
  for (int code = 0; code < 0x7e; ++code) {
    const float lo = fp8_e4m3_to_f32(static_cast<uint8_t>(code)), hi = fp8_e4m3_to_f32(static_cast<uint8_t>(code + 1));
    const float mid = (lo + hi) / 2;  // exact: both are short binary fractions
    for (float x : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f), lo, hi})
      values.insert(values.end(), {x, -x});
  }
  values.insert(values.end(), {0.0f, -0.0f, 448.0f, 449.0f, 464.0f, 1e30f, -1e30f, INFINITY, -INFINITY, NAN});
  while (values.size() % 16 != 5) values.push_back(1.0f);  // a scalar tail too
  for (float scale : {1.0f, 0.0625f, 0.37f}) {
    std::vector<uint8_t> codes(values.size());
    fp8_row_from_f32(values.data(), static_cast<int64_t>(values.size()), scale, codes.data());
    for (size_t i = 0; i < values.size(); ++i)
      ASSERT_EQ(codes[i], f32_to_fp8_e4m3(values[i] / scale)) << values[i] << " / " << scale;
    std::vector<float> back(values.size());
    fp8_row_to_f32(codes.data(), static_cast<int64_t>(codes.size()), scale, back.data());
    for (size_t i = 0; i < codes.size(); ++i) {
      const float want = fp8_e4m3_to_f32(codes[i]) * scale;
      ASSERT_TRUE(back[i] == want || (std::isnan(back[i]) && std::isnan(want))) << int(codes[i]);
    }
  }
}

TEST(CpuKernels, StoreKvQuantizesIntoAnFp8CacheWithItsScales) {
  const int tokens = 2, kv_heads = 1, hd = 4;
  std::vector<float> k = {0.1f, -0.3f, 1000.0f, -1000.0f, 0.0f, 2.0f, 0.013f, -448.0f};
  std::vector<float> v = {1.0f, 2.0f, 3.0f, 4.0f, -1.0f, -2.0f, 0.5f, 0.25f};
  std::vector<uint8_t> kc(2 * hd, 0xaa), vc(kc.size(), 0xaa);
  std::vector<int32_t> slots = {1, 0}, positions = {0, 1}, seq = {0, 0};
  BatchView batch{Tensor(positions.data(), DType::kI32, {tokens}),
                  Tensor(seq.data(), DType::kI32, {tokens}),
                  Tensor(),
                  Tensor(),
                  Tensor(slots.data(), DType::kI32, {tokens}),
                  4,
                  1,
                  tokens};
  const float k_scale = 0.5f, v_scale = 0.125f;
  store_kv(Tensor(k.data(), DType::kF32, {tokens, kv_heads, hd}), Tensor(v.data(), DType::kF32, {tokens, kv_heads, hd}),
           {Tensor(kc.data(), DType::kF8E4M3, {2, kv_heads, hd}), Tensor(vc.data(), DType::kF8E4M3, {2, kv_heads, hd}),
            k_scale, v_scale},
           batch);
  for (int t = 0; t < tokens; ++t)
    for (int i = 0; i < hd; ++i) {
      const int slot = slots[t];
      EXPECT_EQ(kc[slot * hd + i], f32_to_fp8_e4m3(k[t * hd + i] / k_scale)) << t << " " << i;
      EXPECT_EQ(vc[slot * hd + i], f32_to_fp8_e4m3(v[t * hd + i] / v_scale)) << t << " " << i;
    }
  // Saturation: +-1000 / 0.5 stores +-448 (the largest finite e4m3), never NaN.
  EXPECT_EQ(fp8_e4m3_to_f32(kc[1 * hd + 2]) * k_scale, 224.0f);
  EXPECT_EQ(fp8_e4m3_to_f32(kc[1 * hd + 3]) * k_scale, -224.0f);
  EXPECT_EQ(fp8_e4m3_to_f32(vc[1 * hd + 1]) * v_scale, 2.0f);  // exact: 16 x 0.125
}

TEST(CpuKernels, MoeRoutingModes) {
  std::vector<float> logits = {1.0f, 3.0f, 2.0f, 3.0f};
  std::vector<int32_t> ids(2);
  std::vector<float> w(2);
  moe_route(Tensor(logits.data(), DType::kF32, {1, 4}), MoeRouting::kTopKSoftmax, false,
            Tensor(ids.data(), DType::kI32, {1, 2}), Tensor(w.data(), DType::kF32, {1, 2}));
  EXPECT_EQ(ids[0], 1);  // tie between experts 1 and 3: lower id first
  EXPECT_EQ(ids[1], 3);
  EXPECT_FLOAT_EQ(w[0], 0.5f);
  moe_route(Tensor(logits.data(), DType::kF32, {1, 4}), MoeRouting::kSoftmaxTopK, false,
            Tensor(ids.data(), DType::kI32, {1, 2}), Tensor(w.data(), DType::kF32, {1, 2}));
  const double total = std::exp(1.0) + 2 * std::exp(3.0) + std::exp(2.0);
  EXPECT_NEAR(w[0], std::exp(3.0) / total, 1e-6);
}

TEST(CpuKernels, RopeRotatesHalfSplitPairs) {
  ThreadPool pool(1);
  std::vector<float> x = {1, 2, 3, 4};  // one token, one head, hd 4
  std::vector<float> table = {1, 1, 0, 0, /*pos 1*/ 0.5f, 0.25f, 0.1f, 0.2f};
  std::vector<int32_t> pos = {1};
  rope(pool, Tensor(x.data(), DType::kF32, {1, 1, 4}), Tensor(pos.data(), DType::kI32, {1}),
       Tensor(table.data(), DType::kF32, {2, 4}), 4);
  EXPECT_FLOAT_EQ(x[0], 1 * 0.5f - 3 * 0.1f);
  EXPECT_FLOAT_EQ(x[2], 3 * 0.5f + 1 * 0.1f);
  EXPECT_FLOAT_EQ(x[1], 2 * 0.25f - 4 * 0.2f);
}

}  // namespace
}  // namespace rs::cpu

namespace rs::cpu {
namespace {

TEST(CpuKernels, Bf16GemmMatchesReferenceOnRoundedActivations) {
  ThreadPool pool(2);
  const int64_t in = 200, out = 37, tokens = 11;  // odd sizes exercise every tail path
  auto w32 = random_vector(in * out, 5);
  std::vector<uint16_t> w16(w32.size());
  for (size_t i = 0; i < w32.size(); ++i) w16[i] = f32_to_bf16(w32[i]);
  auto x = random_vector(tokens * in, 6);
  std::vector<float> got(tokens * out);
  LinearWeight w{LinearWeight::Format::kDense, Tensor(w16.data(), DType::kBF16, {out, in}), Tensor(), out, in};
  linear(pool, Tensor(x.data(), DType::kF32, {tokens, in}), w, Tensor(), Tensor(got.data(), DType::kF32, {tokens, out}),
         /*bf16_activations=*/true);
  // Builds without AVX512-BF16 keep exact f32 activations; with it, activations are rounded to bf16.
  const bool rounded = has_bf16_gemm();
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t o = 0; o < out; ++o) {
      double ref = 0;
      for (int64_t i = 0; i < in; ++i) {
        const float xi = rounded ? bf16_to_f32(f32_to_bf16(x[t * in + i])) : x[t * in + i];
        ref += static_cast<double>(xi) * bf16_to_f32(w16[o * in + i]);
      }
      EXPECT_NEAR(got[t * out + o], ref, 1e-3) << t << " " << o;
    }
}

}  // namespace
}  // namespace rs::cpu

namespace rs::cpu {
namespace {

// Packed (VNNI) weights through linear(): bf16-rounded activations for prefill-sized batches, exact f32 activations
// for decode-sized ones (<= 4 tokens); odd in, out not a multiple of 16 or 64, token counts off the 6-token tile (split
// into near-equal tiles), and in = 1101 (551 pairs: one full 512-pair K block plus a 39-pair remainder block).
TEST(CpuKernels, PackedBf16LinearMatchesNaive) {
  if (!has_bf16_gemm()) GTEST_SKIP() << "no AVX512-BF16 in this build";
  ThreadPool pool(2);
  for (auto [out, in] : {std::pair<int64_t, int64_t>{37, 201}, {130, 64}, {64, 7}, {200, 130}, {70, 1101}}) {
    auto w32 = random_vector(in * out, 7);
    std::vector<uint16_t> w16(w32.size());
    for (size_t i = 0; i < w32.size(); ++i) w16[i] = f32_to_bf16(w32[i]);
    std::vector<uint16_t> packed(packed_elements(out, in));
    pack_bf16_weight(w16.data(), out, in, packed.data());
    LinearWeight w{LinearWeight::Format::kDense,
                   Tensor(w16.data(), DType::kBF16, {out, in}),
                   Tensor(),
                   out,
                   in,
                   Tensor(packed.data(), DType::kBF16, {static_cast<int64_t>(packed.size())})};
    auto bias = random_vector(out, 8);
    for (int64_t tokens : {1, 2, 3, 4, 5, 6, 7, 11, 13, 17, 40}) {
      auto x = random_vector(tokens * in, 9);
      std::vector<float> got(tokens * out);
      linear(pool, Tensor(x.data(), DType::kF32, {tokens, in}), w, Tensor(bias.data(), DType::kF32, {out}),
             Tensor(got.data(), DType::kF32, {tokens, out}), /*bf16_activations=*/true);
      const bool round_x = tokens > 4;
      for (int64_t t = 0; t < tokens; ++t)
        for (int64_t o = 0; o < out; ++o) {
          double ref = bias[o];
          for (int64_t i = 0; i < in; ++i) {
            const float xv = round_x ? bf16_to_f32(f32_to_bf16(x[t * in + i])) : x[t * in + i];
            ref += static_cast<double>(xv) * bf16_to_f32(w16[o * in + i]);
          }
          ASSERT_NEAR(got[t * out + o], ref, 1e-3) << out << "x" << in << " tokens " << tokens << " " << t << " " << o;
        }
    }
  }
}

}  // namespace
}  // namespace rs::cpu

namespace rs::cpu {
namespace {

// The vector exp inside silu_mul against std::exp, over saturating inputs and a width off the 16-lane vector.
TEST(CpuKernels, SiluMulMatchesScalarReference) {
  ThreadPool pool(2);
  const int64_t rows = 3, inter = 37;
  auto gate_up = random_vector(rows * 2 * inter, 10, 4.0f);
  gate_up[0] = -100.0f, gate_up[1] = 100.0f, gate_up[2] = 0.0f;
  std::vector<float> got(rows * inter);
  silu_mul(pool, Tensor(gate_up.data(), DType::kF32, {rows, 2 * inter}),
           Tensor(got.data(), DType::kF32, {rows, inter}));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < inter; ++i) {
      const double g = gate_up[r * 2 * inter + i], u = gate_up[r * 2 * inter + inter + i];
      const double ref = g / (1.0 + std::exp(-g)) * u;
      EXPECT_NEAR(got[r * inter + i], ref, 1e-5 * (1.0 + std::fabs(ref))) << r << " " << i;
    }
}

}  // namespace
}  // namespace rs::cpu

namespace rs::cpu {
namespace {

TEST(CpuKernels, TokenBitmaskMasksClearBitsAndTheDefaultAgrees) {
  const int64_t rows = 3, vocab = 70, words = 3;                  // 70: the last word is partial
  std::vector<uint32_t> bits = {0xFFFFFFFFu, 0u,          0x3Fu,  // row 0: tokens 0-31 and 64-69
                                0x5u,        0x80000000u, 0u,     // row 1: tokens 0, 2 and 63
                                0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu};
  const auto expected_allowed = [&](int64_t r, int64_t v) { return (bits[r * words + v / 32] >> (v % 32)) & 1u; };
  const std::vector<float> logits = random_vector(rows * vocab, 5);
  std::vector<float> kernel = logits, fallback = logits;
  apply_token_bitmask(Tensor(kernel.data(), DType::kF32, {rows, vocab}),
                      Tensor(bits.data(), DType::kU32, {rows, words}));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t v = 0; v < vocab; ++v)
      EXPECT_EQ(kernel[r * vocab + v], expected_allowed(r, v) ? logits[r * vocab + v] : -INFINITY) << r << "," << v;
  // Backend's default (through host copies) gives the same rows.
  auto backend = make_backend("cpu", BackendOptions{.num_threads = 1});
  backend->Backend::apply_token_bitmask(Tensor(fallback.data(), DType::kF32, {rows, vocab}),
                                        Tensor(bits.data(), DType::kU32, {rows, words}));
  EXPECT_EQ(fallback, kernel);
}

}  // namespace
}  // namespace rs::cpu
