#include "memory/slot_allocator.h"

#include <gtest/gtest.h>

#include "base/error.h"

namespace rs::memory {
namespace {

TEST(StateSlotAllocator, HandsOutEachSlotOnceAndTakesItBack) {
  StateSlotAllocator slots(3);
  EXPECT_EQ(slots.num_free(), 3);
  const int32_t a = slots.allocate(), b = slots.allocate(), c = slots.allocate();
  EXPECT_EQ(a, 0);
  EXPECT_EQ(b, 1);
  EXPECT_EQ(c, 2);
  EXPECT_EQ(slots.allocate(), -1);
  EXPECT_EQ(slots.num_used(), 3);
  slots.free(b);
  EXPECT_FALSE(slots.in_use(b));
  EXPECT_EQ(slots.allocate(), b);
  EXPECT_TRUE(slots.in_use(b));
}

TEST(StateSlotAllocator, RefusesDoubleFreeAndStrangers) {
  StateSlotAllocator slots(2);
  const int32_t a = slots.allocate();
  slots.free(a);
  EXPECT_THROW(slots.free(a), Error);
  EXPECT_THROW(slots.free(5), Error);
  EXPECT_THROW(slots.free(-1), Error);
  EXPECT_EQ(slots.num_free(), 2);
}

}  // namespace
}  // namespace rs::memory
