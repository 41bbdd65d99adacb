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

// Weight bytes one decode step reads: every weight once, except the embedding table when the LM head is separate.
size_t decode_weight_bytes(engine::Engine& engine);

double median(std::vector<double> values);

}  // namespace rs::app
