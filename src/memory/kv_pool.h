// KvPool: paged K/V memory on the backend's device, with layers grouped by attention window.
// Each group has its own page ids: a sliding-window group needs far fewer pages (see plan_kv_pool).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/backend.h"

namespace rs::memory {

struct KvGroup {
  int32_t window = 0;           // 0 = full attention; W = the layer reads the last W positions (self included)
  std::vector<int32_t> layers;  // model layer indices in this group
  int64_t num_pages = 0;
};

struct KvPoolConfig {
  int32_t page_size = 16;  // tokens per page
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  DType dtype = DType::kF32;
  std::vector<KvGroup> groups;
  // Bytes kept outside the pool for every slot of the full-attention group (an EAGLE-3 target's feature cache):
  // plan_kv_pool counts them against the budget.
  size_t extra_bytes_per_full_slot = 0;
};

// layer_windows entry of a layer that keeps no K/V (a gated-delta-net layer, whose memory is a StatePool slot).
constexpr int32_t kNoKvLayer = -1;

// Groups layers by window: full-attention layers first, then one group per distinct window size.
// layer_windows[l] = 0 for full attention, the window in tokens, or kNoKvLayer (no group). num_pages is left 0.
std::vector<KvGroup> group_layers_by_window(std::span<const int32_t> layer_windows);

// Bytes one page of `group` occupies (K and V, all its layers).
size_t page_bytes(const KvPoolConfig& config, const KvGroup& group);

// Pages a request of `context_tokens` needs in a group (a window group only keeps the pages its window can read,
// plus one page of slack because the window straddles a page boundary).
int64_t pages_needed(const KvGroup& group, int32_t page_size, int64_t context_tokens);

// Splits `budget_bytes` among the groups: the full-attention group gets what remains after each window group is
// given enough pages for the windows of `max_running_requests` plus one step of `max_step_tokens` new tokens (a
// prefill chunk writes all its tokens before any page can be released), twice over so the prefix cache can keep
// window tails. A model without full-attention layers splits the whole budget among its window groups.
void plan_kv_pool(KvPoolConfig& config, size_t budget_bytes, int32_t max_running_requests, int64_t max_step_tokens);

class KvPool {
 public:
  KvPool(Backend& backend, KvPoolConfig config);

  const KvPoolConfig& config() const { return config_; }
  int32_t page_size() const { return config_.page_size; }
  int num_groups() const { return static_cast<int>(config_.groups.size()); }
  const KvGroup& group(int g) const { return config_.groups[g]; }
  int group_of_layer(int layer) const { return layer_group_[layer]; }
  // Cache of one layer: [num_pages * page_size, kv_heads, head_dim] of its group.
  Tensor k_cache(int layer) const { return k_[layer]; }
  Tensor v_cache(int layer) const { return v_[layer]; }
  // The layer's K/V with their FP8 scales (1 until set_scales).
  KvCache cache(int layer) const { return {k_[layer], v_[layer], scales_[layer].k, scales_[layer].v}; }
  // FP8 cache scales of one layer (the checkpoint's k_scale / v_scale); positive.
  void set_scales(int layer, float k_scale, float v_scale);
  size_t total_bytes() const;

 private:
  KvPoolConfig config_;
  std::vector<int> layer_group_;
  std::vector<Buffer> buffers_;
  std::vector<Tensor> k_, v_;
  struct Scales {
    float k = 1.0f, v = 1.0f;
  };
  std::vector<Scales> scales_;
};

}  // namespace rs::memory
