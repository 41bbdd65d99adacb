#include "memory/state_pool.h"

#include <gtest/gtest.h>

#include "backend/backend.h"
#include "base/error.h"

namespace rs::memory {
namespace {

StateGeometry small_geometry() {
  return StateGeometry{
      .layers = {0, 1, 3}, .conv_channels = 24, .conv_kernel = 4, .num_v_heads = 2, .k_head_dim = 4, .v_head_dim = 8};
}

TEST(StatePool, SlotBytesCountEveryLayer) {
  const StateGeometry g = small_geometry();
  // Per layer: conv 24 x 3 + recurrent 2 x 4 x 8 = 72 + 64 floats.
  EXPECT_EQ(slot_bytes(g), 3u * (72 + 64) * sizeof(float));
  EXPECT_EQ(plan_state_slots(g, 10 * slot_bytes(g) + 1, 64), 10);
  EXPECT_EQ(plan_state_slots(g, 10 * slot_bytes(g), 4), 4);
  EXPECT_EQ(plan_state_slots(StateGeometry{}, 1 << 20, 4), 0);
}

TEST(StatePool, LayersWithStateGetZeroedSlots) {
  auto backend = make_backend("cpu");
  StatePool pool(*backend, small_geometry(), 5);
  EXPECT_EQ(pool.num_slots(), 5);
  EXPECT_EQ(pool.conv_state(1).shape_string(), Tensor(nullptr, DType::kF32, {5, 24, 3}).shape_string());
  EXPECT_EQ(pool.recurrent_state(3).shape_string(), Tensor(nullptr, DType::kF32, {5, 2, 4, 8}).shape_string());
  EXPECT_TRUE(pool.conv_state(2).empty());  // an attention layer keeps no state
  EXPECT_EQ(pool.total_bytes(), 5 * slot_bytes(small_geometry()));
  const float* recurrent = pool.recurrent_state(0).data_as<float>();
  for (int64_t i = 0; i < pool.recurrent_state(0).numel(); ++i) ASSERT_EQ(recurrent[i], 0.0f);
}

TEST(StatePool, RefusesZeroSlotsForAHybridModel) {
  auto backend = make_backend("cpu");
  EXPECT_THROW(StatePool(*backend, small_geometry(), 0), Error);
  StatePool none(*backend, StateGeometry{}, 0);  // a model without recurrent layers needs none
  EXPECT_EQ(none.total_bytes(), 0u);
}

}  // namespace
}  // namespace rs::memory
