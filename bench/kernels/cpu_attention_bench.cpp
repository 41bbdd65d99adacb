// CPU paged attention: a causal prefill of T tokens of one sequence (GFLOP/s of the q.k and p.v products that the
// causal mask keeps) and a decode batch (one token per sequence over a long context). Qwen3-0.6B shape by default:
// 16 query heads sharing 8 KV heads of 128 dims, pages of 16 tokens.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "backend/cpu/kernels/kernels.h"

namespace {

using rs::BatchView;
using rs::DType;
using rs::Tensor;

struct AttentionProblem {
  int32_t heads = 16, kv_heads = 8, hd = 128, page_size = 16;
  std::vector<float> q, kc, vc, out;
  std::vector<uint16_t> kc16, vc16;  // the same cache in bf16
  std::vector<int32_t> positions, token_seq, kv_len, table, slots;
  BatchView batch;
  double flops = 0;
};

// `seqs` sequences of `context` tokens each; the last `queries` positions of each ask.
AttentionProblem make_attention(int32_t seqs, int32_t context, int32_t queries) {
  AttentionProblem p;
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const int32_t pages_per_seq = (context + p.page_size - 1) / p.page_size;
  const int64_t rows = int64_t{seqs} * pages_per_seq * p.page_size;
  p.kc.resize(rows * p.kv_heads * p.hd), p.vc.resize(p.kc.size());
  for (auto& x : p.kc) x = dist(rng);
  for (auto& x : p.vc) x = dist(rng);
  for (float x : p.kc) p.kc16.push_back(rs::f32_to_bf16(x));
  for (float x : p.vc) p.vc16.push_back(rs::f32_to_bf16(x));
  for (int32_t s = 0; s < seqs; ++s) {
    p.kv_len.push_back(context);
    for (int32_t i = 0; i < pages_per_seq; ++i) p.table.push_back(s * pages_per_seq + i);
    for (int32_t i = context - queries; i < context; ++i) {
      p.positions.push_back(i), p.token_seq.push_back(s);
      p.slots.push_back((s * pages_per_seq + i / p.page_size) * p.page_size + i % p.page_size);
      p.flops += 4.0 * p.heads * p.hd * (i + 1);
    }
  }
  const int64_t tokens = static_cast<int64_t>(p.positions.size());
  p.q.resize(tokens * p.heads * p.hd);
  for (auto& x : p.q) x = dist(rng);
  p.out.resize(p.q.size());
  p.batch = BatchView{Tensor(p.positions.data(), DType::kI32, {tokens}),
                      Tensor(p.token_seq.data(), DType::kI32, {tokens}),
                      Tensor(p.kv_len.data(), DType::kI32, {seqs}),
                      Tensor(p.table.data(), DType::kI32, {seqs, pages_per_seq}),
                      Tensor(p.slots.data(), DType::kI32, {tokens}),
                      p.page_size,
                      seqs,
                      context};
  return p;
}

// Args: sequences, context, queries per sequence, threads, cache (0 f32, 1 bf16).
void BM_Attention(benchmark::State& state) {
  AttentionProblem p = make_attention(static_cast<int32_t>(state.range(0)), static_cast<int32_t>(state.range(1)),
                                      static_cast<int32_t>(state.range(2)));
  rs::ThreadPool pool(static_cast<int>(state.range(3)));
  const int64_t tokens = static_cast<int64_t>(p.positions.size());
  const int64_t cache_rows = static_cast<int64_t>(p.kc.size()) / (p.kv_heads * p.hd);
  const rs::AttentionParams params{p.heads, p.kv_heads, p.hd, 0.088f, 0, Tensor()};
  const bool bf16 = state.range(4) != 0;
  const Tensor kc = bf16 ? Tensor(p.kc16.data(), DType::kBF16, {cache_rows, p.kv_heads, p.hd})
                         : Tensor(p.kc.data(), DType::kF32, {cache_rows, p.kv_heads, p.hd});
  const Tensor vc = bf16 ? Tensor(p.vc16.data(), DType::kBF16, {cache_rows, p.kv_heads, p.hd})
                         : Tensor(p.vc.data(), DType::kF32, {cache_rows, p.kv_heads, p.hd});
  for (auto _ : state) {
    rs::cpu::attention(pool, Tensor(p.q.data(), DType::kF32, {tokens, p.heads, p.hd}), {kc, vc}, p.batch, params,
                       Tensor(p.out.data(), DType::kF32, {tokens, p.heads * p.hd}));
    benchmark::DoNotOptimize(p.out.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(p.flops * state.iterations() / 1e9, benchmark::Counter::kIsRate);
}

BENCHMARK(BM_Attention)
    ->Name("attention")
    ->ArgNames({"seqs", "context", "queries", "threads", "bf16"})
    ->Args({1, 128, 128, 2, 0})    // 128-token prefill
    ->Args({1, 1024, 1024, 2, 0})  // 1k-token prefill
    ->Args({8, 1024, 1, 2, 0})     // decode of 8 sequences at 1k context
    ->Args({1, 128, 128, 2, 1})    // the same three over a bf16 cache
    ->Args({1, 1024, 1024, 2, 1})
    ->Args({8, 1024, 1, 2, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
