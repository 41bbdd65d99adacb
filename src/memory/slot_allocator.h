// StateSlotAllocator: which recurrent-state slots of the StatePool are free. One slot per running request of a hybrid
// model; owned by the scheduler thread (no locks).
#pragma once

#include <cstdint>
#include <vector>

namespace rs::memory {

class StateSlotAllocator {
 public:
  explicit StateSlotAllocator(int32_t num_slots);

  int32_t num_slots() const { return static_cast<int32_t>(in_use_.size()); }
  int32_t num_free() const { return static_cast<int32_t>(free_slots_.size()); }
  int32_t num_used() const { return num_slots() - num_free(); }
  bool in_use(int32_t slot) const { return in_use_[slot]; }

  // Takes a free slot; -1 when none is free. The slot's contents are stale: the model resets a slot whose sequence
  // starts at position 0.
  int32_t allocate();
  // Returns a slot in use to the free list (a slot freed twice, or never allocated, throws).
  void free(int32_t slot);

 private:
  std::vector<int32_t> free_slots_;  // a stack: the lowest slots are handed out first
  std::vector<bool> in_use_;         // [num_slots]
};

}  // namespace rs::memory
