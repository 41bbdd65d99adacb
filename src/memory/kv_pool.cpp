#include "memory/kv_pool.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace rs::memory {

std::vector<KvGroup> group_layers_by_window(std::span<const int32_t> layer_windows) {
  std::map<int32_t, std::vector<int32_t>> by_window;  // window 0 (full) sorts first
  for (size_t layer = 0; layer < layer_windows.size(); ++layer)
    if (layer_windows[layer] != kNoKvLayer)
      by_window[std::max(0, layer_windows[layer])].push_back(static_cast<int32_t>(layer));
  std::vector<KvGroup> groups;
  for (auto& [window, layers] : by_window) groups.push_back(KvGroup{window, std::move(layers), 0});
  return groups;
}

size_t page_bytes(const KvPoolConfig& config, const KvGroup& group) {
  return 2ull * group.layers.size() * config.page_size * config.num_kv_heads * config.head_dim *
         dtype_size(config.dtype);
}

int64_t pages_needed(const KvGroup& group, int32_t page_size, int64_t context_tokens) {
  const int64_t tokens = group.window > 0 ? std::min<int64_t>(context_tokens, group.window) : context_tokens;
  const int64_t pages = (tokens + page_size - 1) / page_size;
  return group.window > 0 ? pages + 1 : pages;
}

void plan_kv_pool(KvPoolConfig& config, size_t budget_bytes, int32_t max_running_requests, int64_t max_step_tokens) {
  RS_CHECK(config.page_size > 0, "page size must be positive, got {}", config.page_size);
  bool has_full = false;
  size_t window_bytes = 0;
  for (auto& group : config.groups) {
    if (group.window == 0) {
      has_full = true;
      continue;
    }
    const int64_t step_pages = (max_step_tokens + config.page_size - 1) / config.page_size;
    group.num_pages =
        2 * (std::max(1, max_running_requests) * pages_needed(group, config.page_size, group.window) + step_pages);
    window_bytes += group.num_pages * page_bytes(config, group);
  }
  if (!has_full) {
    // Only windowed layers: give every window group an equal share of the budget.
    for (auto& group : config.groups)
      group.num_pages =
          std::max<int64_t>(group.num_pages, budget_bytes / config.groups.size() / page_bytes(config, group));
    return;
  }
  RS_CHECK(window_bytes < budget_bytes, "KV budget of {} MiB cannot hold the sliding windows of {} requests ({} MiB)",
           budget_bytes >> 20, max_running_requests, window_bytes >> 20);
  for (auto& group : config.groups)
    if (group.window == 0)
      group.num_pages = (budget_bytes - window_bytes) /
                        (page_bytes(config, group) + config.extra_bytes_per_full_slot * config.page_size);
  for (auto& group : config.groups)
    RS_CHECK(group.num_pages > 0, "KV budget too small: group with window {} gets no pages", group.window);
}

KvPool::KvPool(Backend& backend, KvPoolConfig config) : config_(std::move(config)) {
  RS_CHECK(!config_.groups.empty(), "a KV pool needs at least one attention layer");
  int num_layers = 0;
  for (const auto& group : config_.groups)
    for (int layer : group.layers) num_layers = std::max(num_layers, layer + 1);
  layer_group_.assign(num_layers, -1);
  k_.resize(num_layers);
  v_.resize(num_layers);
  scales_.resize(num_layers);
  for (int g = 0; g < num_groups(); ++g) {
    const KvGroup& group = config_.groups[g];
    RS_CHECK(group.num_pages > 0, "KV group {} has no pages", g);
    const int64_t rows = group.num_pages * config_.page_size;
    const size_t bytes = rows * config_.num_kv_heads * config_.head_dim * dtype_size(config_.dtype);
    for (int layer : group.layers) {
      layer_group_[layer] = g;
      for (auto* side : {&k_, &v_}) {
        buffers_.push_back(backend.alloc(bytes));
        (*side)[layer] = Tensor(buffers_.back().data(), config_.dtype, {rows, config_.num_kv_heads, config_.head_dim},
                                backend.device());
      }
    }
  }
}

void KvPool::set_scales(int layer, float k_scale, float v_scale) {
  RS_CHECK(layer >= 0 && layer < static_cast<int>(scales_.size()) && layer_group_[layer] >= 0,
           "layer {} keeps no K/V in this pool", layer);
  RS_CHECK(k_scale > 0.0f && v_scale > 0.0f && std::isfinite(k_scale) && std::isfinite(v_scale),
           "layer {}: KV cache scales must be positive and finite (k {}, v {})", layer, k_scale, v_scale);
  scales_[layer] = {k_scale, v_scale};
}

size_t KvPool::total_bytes() const {
  size_t total = 0;
  for (const auto& buffer : buffers_) total += buffer.bytes();
  return total;
}

}  // namespace rs::memory
