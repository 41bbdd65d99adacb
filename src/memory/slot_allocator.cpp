#include "memory/slot_allocator.h"

#include "base/error.h"

namespace rs::memory {

StateSlotAllocator::StateSlotAllocator(int32_t num_slots) : in_use_(num_slots, false) {
  RS_CHECK(num_slots >= 0, "negative number of state slots: {}", num_slots);
  for (int32_t slot = num_slots - 1; slot >= 0; --slot) free_slots_.push_back(slot);
}

int32_t StateSlotAllocator::allocate() {
  if (free_slots_.empty()) return -1;
  const int32_t slot = free_slots_.back();
  free_slots_.pop_back();
  in_use_[slot] = true;
  return slot;
}

void StateSlotAllocator::free(int32_t slot) {
  RS_CHECK(slot >= 0 && slot < num_slots() && in_use_[slot], "state slot {} is not in use", slot);
  in_use_[slot] = false;
  free_slots_.push_back(slot);
}

}  // namespace rs::memory
