// CUDA backend microbenchmarks through the Backend interface: bf16/MXFP4/f32 linear (GEMV and GEMM), paged attention
// (decode and prefill), RMSNorm and gpt-oss-shaped MoE experts. Each timed iteration enqueues kInner ops and waits
// once, so launch gaps are included the way a model step sees them. Reports weight/KV bytes per second and FLOP/s.
// Skips when no CUDA device (or no CUDA build) is present. Run: rs_kernel_bench --benchmark_filter=Cuda
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <vector>

#include "backend/backend.h"

namespace rs {
namespace {

constexpr int kInner = 20;

Backend* cuda_backend() {
  static std::unique_ptr<Backend> backend = []() -> std::unique_ptr<Backend> {
    try {
      return make_backend("cuda");
    } catch (const Error&) {
      return nullptr;
    }
  }();
  return backend.get();
}

// Deterministic pseudo-random bytes shaped as small floats of the dtype (fast: no <random> over gigabytes).
void fill_random(void* data, size_t bytes, DType dtype, uint64_t seed) {
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  auto next = [&] {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    return s;
  };
  if (dtype == DType::kF32) {
    auto* f = static_cast<float*>(data);
    for (size_t i = 0; i < bytes / 4; ++i)
      f[i] = static_cast<float>(static_cast<int64_t>(next() % 2001) - 1000) * 1e-3f;
  } else if (dtype == DType::kBF16) {
    auto* h = static_cast<uint16_t*>(data);
    for (size_t i = 0; i < bytes / 2; ++i)
      h[i] = f32_to_bf16(static_cast<float>(static_cast<int64_t>(next() % 2001) - 1000) * 1e-3f);
  } else {
    auto* b = static_cast<uint8_t*>(data);
    for (size_t i = 0; i < bytes; ++i) b[i] = static_cast<uint8_t>(next());
  }
}

// A device tensor with random contents, owned by `keep`.
Tensor device_random(Backend& be, DType dtype, std::initializer_list<int64_t> shape, std::vector<Buffer>& keep,
                     uint64_t seed, uint8_t fill_byte = 0) {
  Tensor probe(nullptr, dtype, shape);
  Buffer host = Buffer::host(probe.bytes());
  if (fill_byte) {
    std::memset(host.data(), fill_byte, probe.bytes());
  } else {
    fill_random(host.data(), probe.bytes(), dtype, seed);
  }
  return be.upload_weight(Tensor(host.data(), dtype, shape), keep);
}

// Times `op` kInner times per iteration with one synchronize; sets per-op manual time.
template <typename Op>
void time_loop(benchmark::State& state, Backend& be, Op op) {
  op();
  be.synchronize();
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kInner; ++i) op();
    be.synchronize();
    state.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / kInner);
  }
}

void set_rates(benchmark::State& state, double bytes, double flops) {
  state.counters["bytes/s"] = benchmark::Counter(bytes, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["FLOP/s"] = benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
}

// Args: tokens, format (0 f32, 1 bf16, 2 mxfp4), out, in.
void BM_CudaLinear(benchmark::State& state) {
  Backend* be = cuda_backend();
  if (!be) return state.SkipWithError("no CUDA device");
  const int64_t tokens = state.range(0), format = state.range(1), out = state.range(2), in = state.range(3);
  static std::map<std::vector<int64_t>, std::pair<LinearWeight, std::vector<Buffer>>> weights;
  auto& [w, keep] = weights[{format, out, in}];
  if (w.out_features == 0) {
    w.out_features = out, w.in_features = in;
    if (format == 2) {
      w.format = LinearWeight::Format::kMxfp4;
      w.weight = device_random(*be, DType::kU8, {out, in / 32, 16}, keep, 1);
      w.scales = device_random(*be, DType::kU8, {out, in / 32}, keep, 2, 127);
    } else {
      w.weight = device_random(*be, format == 0 ? DType::kF32 : DType::kBF16, {out, in}, keep, 3);
    }
  }
  std::vector<Buffer> act;
  const Tensor x = device_random(*be, DType::kF32, {tokens, in}, act, 4);
  Buffer y = be->alloc(tokens * out * 4);
  Tensor yt(y.data(), DType::kF32, {tokens, out}, be->device());
  time_loop(state, *be, [&] { be->linear(x, w, Tensor(), yt); });
  const double weight_bytes = format == 2 ? out * in / 2.0 + out * in / 32.0 : out * in * (format == 0 ? 4.0 : 2.0);
  set_rates(state, weight_bytes, 2.0 * tokens * out * in);
}
BENCHMARK(BM_CudaLinear)
    ->ArgNames({"T", "fmt", "out", "in"})
    ->Args({1, 1, 14336, 4096})
    ->Args({8, 1, 14336, 4096})
    ->Args({64, 1, 14336, 4096})
    ->Args({512, 1, 14336, 4096})
    ->Args({1, 2, 32768, 8192})
    ->Args({8, 2, 32768, 8192})
    ->Args({512, 2, 32768, 8192})
    ->Args({1, 0, 8192, 4096})
    ->Args({512, 0, 8192, 4096})
    ->UseManualTime()
    ->MinTime(0.2);

// Args: sequences, kv length per sequence, query tokens per sequence; gpt-oss heads 64/8, head_dim 64, page 16.
void BM_CudaAttention(benchmark::State& state) {
  Backend* be = cuda_backend();
  if (!be) return state.SkipWithError("no CUDA device");
  const int32_t seqs = static_cast<int32_t>(state.range(0)), kv_len = static_cast<int32_t>(state.range(1)),
                q_len = static_cast<int32_t>(state.range(2));
  const int32_t heads = 64, kv_heads = 8, hd = 64, page = 16, pages_per_seq = (kv_len + page - 1) / page;
  std::vector<Buffer> keep;
  const int64_t rows = int64_t{seqs} * pages_per_seq * page, tokens = int64_t{seqs} * q_len;
  const Tensor kc = device_random(*be, DType::kF32, {rows, kv_heads, hd}, keep, 5);
  const Tensor vc = device_random(*be, DType::kF32, {rows, kv_heads, hd}, keep, 6);
  const Tensor q = device_random(*be, DType::kF32, {tokens, heads, hd}, keep, 7);
  std::vector<int32_t> pos, seq, table, lens(seqs, kv_len);
  for (int32_t s = 0; s < seqs; ++s) {
    for (int32_t p = kv_len - q_len; p < kv_len; ++p) pos.push_back(p), seq.push_back(s);
    for (int32_t p = 0; p < pages_per_seq; ++p) table.push_back(s * pages_per_seq + p);
  }
  auto upload = [&](std::vector<int32_t>& v, std::initializer_list<int64_t> shape) {
    return be->upload_weight(Tensor(v.data(), DType::kI32, shape), keep);
  };
  const Tensor pt = upload(pos, {tokens}), st = upload(seq, {tokens});
  const BatchView batch{pt, st, upload(lens, {seqs}), upload(table, {seqs, pages_per_seq}), pt, page, seqs, kv_len};
  Buffer out = be->alloc(tokens * heads * hd * 4);
  Tensor ot(out.data(), DType::kF32, {tokens, int64_t{heads} * hd}, be->device());
  const AttentionParams params{heads, kv_heads, hd, 0.125f, 0, Tensor()};
  time_loop(state, *be, [&] { be->attention(q, {kc, vc}, batch, params, ot); });
  const double kv_bytes = 2.0 * seqs * kv_len * kv_heads * hd * 4;
  const double pairs = q_len == 1 ? double(kv_len) : 0.5 * q_len * (q_len + 1) + double(q_len) * (kv_len - q_len);
  set_rates(state, kv_bytes, 4.0 * seqs * pairs * heads * hd);
}
BENCHMARK(BM_CudaAttention)
    ->ArgNames({"S", "kv", "q"})
    ->Args({32, 4096, 1})
    ->Args({1, 32768, 1})
    ->Args({1, 2048, 2048})
    ->UseManualTime()
    ->MinTime(0.2);

void BM_CudaRmsNorm(benchmark::State& state) {
  Backend* be = cuda_backend();
  if (!be) return state.SkipWithError("no CUDA device");
  const int64_t rows = state.range(0), width = state.range(1);
  std::vector<Buffer> keep;
  const Tensor x = device_random(*be, DType::kF32, {rows, width}, keep, 8);
  const Tensor w = device_random(*be, DType::kBF16, {width}, keep, 9);
  Buffer out = be->alloc(rows * width * 4);
  Tensor ot(out.data(), DType::kF32, {rows, width}, be->device());
  time_loop(state, *be, [&] { be->rms_norm(x, w, 1e-5f, false, ot); });
  set_rates(state, 8.0 * rows * width, 3.0 * rows * width);
}
BENCHMARK(BM_CudaRmsNorm)->ArgNames({"rows", "width"})->Args({4096, 4096})->UseManualTime()->MinTime(0.2);

// gpt-oss-20b experts: 32 experts, top-4, hidden 2880, intermediate 2880, MXFP4 with bf16 biases. Arg: tokens.
void BM_CudaMoeExperts(benchmark::State& state) {
  Backend* be = cuda_backend();
  if (!be) return state.SkipWithError("no CUDA device");
  const int64_t tokens = state.range(0), experts = 32, top_k = 4, hidden = 2880, inter = 2880;
  static std::vector<Buffer> keep;
  static MoeWeights moe;
  if (moe.down.empty()) {
    moe.activation = MoeActivation::kClampedSwiGlu;
    for (int64_t e = 0; e < experts; ++e) {
      auto make = [&](int64_t out, int64_t in) {
        LinearWeight w{LinearWeight::Format::kMxfp4, device_random(*be, DType::kU8, {out, in / 32, 16}, keep, 10 + e),
                       device_random(*be, DType::kU8, {out, in / 32}, keep, 0, 122), out, in};
        return w;
      };
      moe.gate_up.push_back(make(2 * inter, hidden));
      moe.down.push_back(make(hidden, inter));
    }
    moe.gate_up_bias = device_random(*be, DType::kBF16, {experts, 2 * inter}, keep, 11);
    moe.down_bias = device_random(*be, DType::kBF16, {experts, hidden}, keep, 12);
  }
  std::vector<Buffer> act;
  const Tensor x = device_random(*be, DType::kF32, {tokens, hidden}, act, 13);
  std::vector<int32_t> ids(tokens * top_k);
  std::vector<float> weights(tokens * top_k, 1.0f / top_k);
  for (int64_t i = 0; i < tokens * top_k; ++i) ids[i] = static_cast<int32_t>((i % top_k) * 8 + (i / top_k) * 5 % 8);
  const Tensor id_t = be->upload_weight(Tensor(ids.data(), DType::kI32, {tokens, top_k}), act);
  const Tensor w_t = be->upload_weight(Tensor(weights.data(), DType::kF32, {tokens, top_k}), act);
  Buffer out = be->alloc(tokens * hidden * 4);
  Tensor ot(out.data(), DType::kF32, {tokens, hidden}, be->device());
  time_loop(state, *be, [&] { be->moe_experts(x, id_t, w_t, moe, ot); });
  int64_t active = 0;
  std::vector<bool> used(experts);
  for (int32_t id : ids) active += used[id] ? 0 : (used[id] = true, 1);
  const double expert_bytes = (2 * inter * hidden + hidden * inter) * (0.5 + 1.0 / 32);
  set_rates(state, active * expert_bytes, 2.0 * tokens * top_k * 3 * inter * hidden);
}
BENCHMARK(BM_CudaMoeExperts)->ArgNames({"T"})->Arg(1)->Arg(8)->Arg(64)->Arg(512)->UseManualTime()->MinTime(0.2);

}  // namespace
}  // namespace rs
