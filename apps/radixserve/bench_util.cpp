// Bandwidth probes and decode byte counts for the bench commands (see bench_util.h).
#include "apps/radixserve/bench_util.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "base/clock.h"
#include "base/log.h"
#include "base/thread_pool.h"

namespace rs::app {

double measure_read_bandwidth(int threads) {
  const size_t floats = (512u << 20) / sizeof(float);
  std::vector<float> data(floats, 1.0f);
  ThreadPool pool(threads);
  double best = 0;
  for (int round = 0; round < 3; ++round) {
    std::vector<double> sums(threads, 0.0);
    const auto start = Clock::now();
    pool.parallel_for(threads, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        const size_t lo = floats / threads * t, hi = floats / threads * (t + 1);
        float acc[16] = {};
        for (size_t i = lo; i < hi; i += 16)
          for (int j = 0; j < 16; ++j) acc[j] += data[i + j];
        sums[t] = std::accumulate(acc, acc + 16, 0.0);
      }
    });
    const double seconds = seconds_since(start);
    RS_CHECK(std::accumulate(sums.begin(), sums.end(), 0.0) > 0, "bandwidth probe lost its data");
    best = std::max(best, floats * sizeof(float) / seconds / 1e9);
  }
  return best;
}

double measure_copy_bandwidth(Backend& backend, size_t max_bytes) {
  for (size_t bytes = max_bytes; bytes >= (size_t{64} << 20); bytes /= 2) {
    Buffer src, dst;
    try {
      src = backend.alloc(bytes);
      dst = backend.alloc(bytes);
      backend.synchronize();
    } catch (const std::exception& e) {
      RS_LOG_WARN("bandwidth probe: no room for 2 x {} MiB ({}); trying less", bytes >> 20, e.what());
      continue;
    }
    const Tensor from(src.data(), DType::kU8, {static_cast<int64_t>(bytes)}, backend.device());
    const Tensor to(dst.data(), DType::kU8, {static_cast<int64_t>(bytes)}, backend.device());
    backend.copy(to, from);  // warm-up
    backend.synchronize();
    constexpr int kCopies = 4;
    double best = 0;
    for (int round = 0; round < 5; ++round) {
      const auto start = Clock::now();
      for (int i = 0; i < kCopies; ++i) backend.copy(to, from);
      backend.synchronize();
      best = std::max(best, 2.0 * bytes * kCopies / seconds_since(start) / 1e9);  // each byte read once, written once
    }
    return best;
  }
  return 0.0;
}

double measure_engine_bandwidth(engine::Engine& engine, std::string* method) {
  if (engine.backend().device().is_cpu()) {
    const int threads = engine.config().num_threads > 0 ? engine.config().num_threads : hardware_threads();
    if (method) *method = "host read probe (512 MiB, " + std::to_string(threads) + " threads)";
    return measure_read_bandwidth(threads);
  }
  if (method) *method = "device-to-device copy (bytes read + written)";
  return measure_copy_bandwidth(engine.backend());
}

double DecodeWeightBytes::expert_share(int64_t batch) const {
  if (experts == 0 || num_experts <= 0 || top_k <= 0) return 1.0;
  return 1.0 - std::pow(1.0 - std::min(1.0, double(top_k) / num_experts), static_cast<double>(batch));
}

DecodeWeightBytes decode_weight_bytes(engine::Engine& engine) {
  const auto& mc = engine.model_config();
  const size_t embed_bytes = static_cast<size_t>(mc.vocab_size) * mc.hidden_size * dtype_size(mc.dtype);
  DecodeWeightBytes bytes;
  bytes.experts = mc.num_experts > 0 ? engine.weight_bytes_if([](std::string_view name) {
    return name.find(".experts.") != std::string_view::npos;
  })
                                     : 0;
  bytes.dense = engine.weight_bytes() - (mc.tie_word_embeddings ? 0 : embed_bytes) - bytes.experts;
  bytes.num_experts = mc.num_experts;
  bytes.top_k = mc.num_experts_per_tok;
  return bytes;
}

double median(std::vector<double> values) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace rs::app
