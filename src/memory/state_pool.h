// StatePool: the recurrent state of gated-delta-net (linear attention) layers on the backend's device, one slot per
// running request: per layer a rolling conv state and the f32 delta-rule state. Constant size, whatever the context.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"

namespace rs::memory {

// Shapes of one slot (MODELS.md §1.6).
struct StateGeometry {
  std::vector<int32_t> layers;  // model layer indices that keep recurrent state (linear attention)
  int32_t conv_channels = 0;    // 2 * key_dim + value_dim
  int32_t conv_kernel = 0;      // linear_conv_kernel_dim; the conv state keeps the last conv_kernel - 1 inputs
  int32_t num_v_heads = 0;
  int32_t k_head_dim = 0;
  int32_t v_head_dim = 0;

  bool empty() const { return layers.empty(); }
};

// Bytes of one slot over all its layers (f32 conv and recurrent states).
size_t slot_bytes(const StateGeometry& geometry);

// Slots that fit in `budget_bytes`, at most `max_slots`; 0 when the model keeps no recurrent state.
int32_t plan_state_slots(const StateGeometry& geometry, size_t budget_bytes, int32_t max_slots);

class StatePool {
 public:
  // Allocates num_slots slots (zero-filled) of every layer of `geometry` on the backend's device.
  StatePool(Backend& backend, StateGeometry geometry, int32_t num_slots);

  const StateGeometry& geometry() const { return geometry_; }
  int32_t num_slots() const { return num_slots_; }
  // Conv state of `layer`: f32 [num_slots, conv_channels, conv_kernel - 1], oldest input first.
  Tensor conv_state(int layer) const { return conv_[layer]; }
  // Delta-rule state of `layer`: f32 [num_slots, num_v_heads, k_head_dim, v_head_dim].
  Tensor recurrent_state(int layer) const { return recurrent_[layer]; }
  size_t total_bytes() const;
  // Copies slot `from` over slot `to` in every layer (a snapshot, or a snapshot restored), in the backend's order.
  void copy_slot(Backend& backend, int32_t from, int32_t to) const;

 private:
  StateGeometry geometry_;
  int32_t num_slots_;
  std::vector<Buffer> buffers_;
  std::vector<Tensor> conv_, recurrent_;  // [model layer]; empty for layers without state
};

}  // namespace rs::memory
