// Shared by `radixserve bench` and `bench one-batch`: memory-bandwidth probes and the weight bytes a decode step reads,
// the two halves of the decode speed bound (bytes read per step / bandwidth).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace rs::app {

// Read bandwidth of this machine with `threads` threads streaming a buffer much larger than the caches (GB/s).
double measure_read_bandwidth(int threads);

// Device-to-device copy bandwidth of a large buffer through the Backend interface, bytes read + written (GB/s); tries
// smaller buffers when `max_bytes` cannot be allocated. Returns 0 when not even a small buffer fits.
double measure_copy_bandwidth(Backend& backend, size_t max_bytes = size_t{2} << 30);

// The engine's bandwidth: the read probe on the CPU (num_threads as configured), device copies elsewhere. `method`
// (optional) receives how it was measured.
double measure_engine_bandwidth(engine::Engine& engine, std::string* method = nullptr);

// Weight bytes one decode step of `batch` sequences reads: every weight once, except the embedding table when the LM
// head is separate, and of a mixture-of-experts layer only the experts the batch selects: under uniform routing a
// share 1 - (1 - k/E)^batch of them (real routers are skewed and select fewer, so the bound this gives is
// conservative).
struct DecodeWeightBytes {
  size_t dense = 0;    // read every step
  size_t experts = 0;  // every MoE layer's routed experts (tensors named "*.experts.*")
  int32_t num_experts = 0, top_k = 0;
  double expert_share(int64_t batch) const;
  double per_step(int64_t batch) const { return static_cast<double>(dense) + experts * expert_share(batch); }
};
DecodeWeightBytes decode_weight_bytes(engine::Engine& engine);

double median(std::vector<double> values);

}  // namespace rs::app
