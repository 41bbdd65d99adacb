// KV memory one request needs, with sliding-window pages reclaimed versus keeping every page (for logs and reports).
#pragma once

#include <cstddef>
#include <cstdint>

#include "memory/kv_pool.h"

namespace rs::memory {

struct KvFootprint {
  size_t windowed_bytes = 0;  // window groups keep only the pages their window reads (pages_needed)
  size_t keep_all_bytes = 0;  // every group keeps every page of the context
};

// Footprint of one request of `context_tokens` tokens under `config` (page_size, heads, dtype, groups).
KvFootprint request_kv_footprint(const KvPoolConfig& config, int64_t context_tokens);

}  // namespace rs::memory
