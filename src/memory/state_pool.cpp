#include "memory/state_pool.h"

#include <algorithm>

#include "base/error.h"

namespace rs::memory {
namespace {

size_t conv_floats(const StateGeometry& g) { return static_cast<size_t>(g.conv_channels) * (g.conv_kernel - 1); }
size_t recurrent_floats(const StateGeometry& g) {
  return static_cast<size_t>(g.num_v_heads) * g.k_head_dim * g.v_head_dim;
}

}  // namespace

size_t slot_bytes(const StateGeometry& geometry) {
  return geometry.layers.size() * (conv_floats(geometry) + recurrent_floats(geometry)) * sizeof(float);
}

int32_t plan_state_slots(const StateGeometry& geometry, size_t budget_bytes, int32_t max_slots) {
  if (geometry.empty()) return 0;
  const size_t fit = budget_bytes / slot_bytes(geometry);
  return static_cast<int32_t>(std::min<size_t>(fit, std::max(max_slots, 0)));
}

StatePool::StatePool(Backend& backend, StateGeometry geometry, int32_t num_slots)
    : geometry_(std::move(geometry)), num_slots_(num_slots) {
  if (geometry_.empty()) return;
  RS_CHECK(num_slots_ > 0, "a model with {} recurrent-state layers needs at least one state slot",
           geometry_.layers.size());
  RS_CHECK(geometry_.conv_channels > 0 && geometry_.conv_kernel > 1 && geometry_.num_v_heads > 0 &&
               geometry_.k_head_dim > 0 && geometry_.v_head_dim > 0,
           "bad recurrent-state geometry: {} conv channels, kernel {}, {} heads of {}x{}", geometry_.conv_channels,
           geometry_.conv_kernel, geometry_.num_v_heads, geometry_.k_head_dim, geometry_.v_head_dim);
  const int layers = *std::max_element(geometry_.layers.begin(), geometry_.layers.end()) + 1;
  conv_.resize(layers);
  recurrent_.resize(layers);
  const Device device = backend.device();
  for (int32_t layer : geometry_.layers) {
    buffers_.push_back(backend.alloc(num_slots_ * conv_floats(geometry_) * sizeof(float)));
    conv_[layer] = Tensor(buffers_.back().data(), DType::kF32,
                          {num_slots_, geometry_.conv_channels, geometry_.conv_kernel - 1}, device);
    buffers_.push_back(backend.alloc(num_slots_ * recurrent_floats(geometry_) * sizeof(float)));
    recurrent_[layer] = Tensor(buffers_.back().data(), DType::kF32,
                               {num_slots_, geometry_.num_v_heads, geometry_.k_head_dim, geometry_.v_head_dim}, device);
  }
}

void StatePool::copy_slot(Backend& backend, int32_t from, int32_t to) const {
  RS_CHECK(from >= 0 && from < num_slots_ && to >= 0 && to < num_slots_, "state copy {} -> {} outside {} slots", from,
           to, num_slots_);
  if (from == to) return;
  for (int32_t layer : geometry_.layers) {
    backend.copy(conv_[layer].slice_rows(to, to + 1), conv_[layer].slice_rows(from, from + 1));
    backend.copy(recurrent_[layer].slice_rows(to, to + 1), recurrent_[layer].slice_rows(from, from + 1));
  }
}

size_t StatePool::total_bytes() const {
  size_t total = 0;
  for (const Buffer& buffer : buffers_) total += buffer.bytes();
  return total;
}

}  // namespace rs::memory
