// CPU linear-layer kernels: prefill-shaped bf16 GEMMs (GFLOP/s) and decode GEMVs (GB/s of weights streamed), for
// row-major bf16 weights and for the VNNI-packed copy CpuBackend::prepare_linear makes. Threads: the args' last value.
// RS_CPU_KERNELS=avx2 measures the kernels of CPUs without AVX512-BF16 (kernels/gemv_avx2.h) on one with them.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "backend/cpu/kernels/gemm_bf16.h"
#include "backend/cpu/kernels/kernels.h"

namespace {

using rs::DType;
using rs::LinearWeight;
using rs::Tensor;

struct Problem {
  std::vector<uint16_t> weight, packed;
  std::vector<float> x, out;
  LinearWeight linear;
};

Problem make_problem(int64_t tokens, int64_t out, int64_t in, bool packed) {
  Problem p;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  p.weight.resize(out * in);
  for (auto& w : p.weight) w = rs::f32_to_bf16(dist(rng) * 0.02f);
  p.x.resize(tokens * in);
  for (auto& v : p.x) v = dist(rng);
  p.out.resize(tokens * out);
  p.linear =
      LinearWeight{LinearWeight::Format::kDense, Tensor(p.weight.data(), DType::kBF16, {out, in}), Tensor(), out, in};
  if (packed) {
    p.packed.resize(rs::cpu::packed_elements(out, in));
    rs::cpu::pack_bf16_weight(p.weight.data(), out, in, p.packed.data());
    p.linear.packed = Tensor(p.packed.data(), DType::kBF16, {static_cast<int64_t>(p.packed.size())});
  }
  return p;
}

// Args: tokens, out, in, packed (0/1), threads. Decode shapes rotate over copies totalling > 64 MiB so that the
// weights stream from DRAM (as in a real decode step) instead of from L3.
void BM_Linear(benchmark::State& state) {
  const int64_t tokens = state.range(0), out = state.range(1), in = state.range(2);
  const bool packed = state.range(3) != 0;
  rs::ThreadPool pool(static_cast<int>(state.range(4)));
  const int64_t weight_bytes = out * in * 2;
  const int64_t copies = tokens <= 4 ? (int64_t{64} << 20) / weight_bytes + 1 : 1;
  std::vector<Problem> problems;
  for (int64_t c = 0; c < copies; ++c) problems.push_back(make_problem(tokens, out, in, packed));
  // The fast path's flag, as CpuBackend passes it: prefill rounds activations to bf16, decode GEMVs keep them f32. A
  // CPU without AVX512-BF16 (or RS_CPU_KERNELS=avx2) runs decode on kernels/gemv_avx2 and prefill on sgemm.
  const bool bf16 = true;
  int64_t next = 0;
  for (auto _ : state) {
    Problem& p = problems[next];
    next = (next + 1) % copies;
    rs::cpu::linear(pool, Tensor(p.x.data(), DType::kF32, {tokens, in}), p.linear, Tensor(),
                    Tensor(p.out.data(), DType::kF32, {tokens, out}), bf16);
    benchmark::DoNotOptimize(p.out.data());
  }
  const double iters = static_cast<double>(state.iterations());
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * tokens * out * in * iters / 1e9, benchmark::Counter::kIsRate);
  state.counters["weight_GB/s"] = benchmark::Counter(weight_bytes * iters / 1e9, benchmark::Counter::kIsRate);
}

void prefill_args(benchmark::internal::Benchmark* b) {
  for (int packed : {0, 1})
    for (auto [out, in] : {std::pair<int64_t, int64_t>{2048, 1024}, {1024, 1024}, {6144, 1024}, {1024, 3072}})
      for (int threads : {1, 2}) b->Args({128, out, in, packed, threads});
  b->ArgNames({"T", "N", "K", "packed", "threads"})->Unit(benchmark::kMillisecond)->UseRealTime();
}

void decode_args(benchmark::internal::Benchmark* b) {
  // 6144 x 1024 and 1024 x 3072 bf16 are 12 MiB and 6 MiB: larger than L2, like a decoder layer's weights.
  for (int packed : {0, 1})
    for (auto [out, in] : {std::pair<int64_t, int64_t>{6144, 1024}, {1024, 3072}})
      for (int threads : {1, 2})
        for (int64_t tokens : {1, 8}) b->Args({tokens, out, in, packed, threads});
  b->ArgNames({"T", "N", "K", "packed", "threads"})->Unit(benchmark::kMicrosecond)->UseRealTime();
}

// Integer (kAffine) weights read as codes (kernels/gemm_affine): args tokens, out, in, bits, group, threads. GB/s
// counts the codes and the f32 (scale, bias) pairs the kernel streams.
struct AffineProblem {
  std::vector<uint8_t> codes;
  std::vector<float> pairs, x, out;
  LinearWeight linear;
};

AffineProblem make_affine(int64_t tokens, int64_t out, int64_t in, int bits, int64_t group) {
  AffineProblem p;
  std::mt19937 rng(1);
  p.codes.resize(out * in * bits / 8);
  for (auto& c : p.codes) c = static_cast<uint8_t>(rng());
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  p.pairs.resize(out * in / group * 2);
  for (auto& v : p.pairs) v = dist(rng) * 0.01f;
  p.x.resize(tokens * in);
  for (auto& v : p.x) v = dist(rng);
  p.out.resize(tokens * out);
  p.linear.format = LinearWeight::Format::kAffine;
  p.linear.weight = Tensor(p.codes.data(), DType::kU8, {out, in * bits / 8});
  p.linear.scales = Tensor(p.pairs.data(), DType::kF32, {out, in / group, 2});
  p.linear.out_features = out;
  p.linear.in_features = in;
  p.linear.scale_block_rows = 1;
  p.linear.scale_block_cols = group;
  p.linear.bits = bits;
  return p;
}

void BM_AffineLinear(benchmark::State& state) {
  const int64_t tokens = state.range(0), out = state.range(1), in = state.range(2), group = state.range(4);
  const int bits = static_cast<int>(state.range(3));
  rs::ThreadPool pool(static_cast<int>(state.range(5)));
  const int64_t bytes = out * in * bits / 8 + out * in / group * 8;
  const int64_t copies = tokens <= 4 ? (int64_t{64} << 20) / bytes + 1 : 1;
  std::vector<AffineProblem> problems;
  for (int64_t c = 0; c < copies; ++c) problems.push_back(make_affine(tokens, out, in, bits, group));
  int64_t next = 0;
  for (auto _ : state) {
    AffineProblem& p = problems[next];
    next = (next + 1) % copies;
    rs::cpu::linear(pool, Tensor(p.x.data(), DType::kF32, {tokens, in}), p.linear, Tensor(),
                    Tensor(p.out.data(), DType::kF32, {tokens, out}), true);
    benchmark::DoNotOptimize(p.out.data());
  }
  const double iters = static_cast<double>(state.iterations());
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * tokens * out * in * iters / 1e9, benchmark::Counter::kIsRate);
  state.counters["weight_GB/s"] = benchmark::Counter(bytes * iters / 1e9, benchmark::Counter::kIsRate);
}

void affine_args(benchmark::internal::Benchmark* b) {
  // Qwen3-0.6B's gate|up and down at GGUF Q4_K (4-bit g32), Q6_K / Q8_0 (8-bit g16 / g32) and MLX 4-bit g64.
  for (int64_t tokens : {1, 8, 128})
    for (auto [bits, group] : {std::pair<int, int64_t>{4, 32}, {4, 64}, {8, 16}, {8, 32}})
      for (auto [out, in] : {std::pair<int64_t, int64_t>{6144, 1024}, {1024, 3072}})
        b->Args({tokens, out, in, bits, group, 2});
  b->ArgNames({"T", "N", "K", "bits", "group", "threads"})->Unit(benchmark::kMicrosecond)->UseRealTime();
}

BENCHMARK(BM_Linear)->Name("prefill_gemm")->Apply(prefill_args);
BENCHMARK(BM_AffineLinear)->Name("affine_linear")->Apply(affine_args);
BENCHMARK(BM_Linear)->Name("decode_gemv")->Apply(decode_args);

}  // namespace
