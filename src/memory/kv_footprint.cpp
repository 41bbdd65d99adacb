#include "memory/kv_footprint.h"

namespace rs::memory {

KvFootprint request_kv_footprint(const KvPoolConfig& config, int64_t context_tokens) {
  KvFootprint footprint;
  const int64_t all_pages = (context_tokens + config.page_size - 1) / config.page_size;
  for (const KvGroup& group : config.groups) {
    const size_t bytes = page_bytes(config, group);
    footprint.windowed_bytes += pages_needed(group, config.page_size, context_tokens) * bytes;
    footprint.keep_all_bytes += all_pages * bytes;
  }
  return footprint;
}

}  // namespace rs::memory
