// DFlashDrafter: a DFlash block-diffusion drafter (model/dflash.cpp) proposes block_size - 1 tokens per sequence in
// one forward. Per request it keeps the K/V of the committed positions it has seen, computed from the target's
// hidden-state taps (the target engine captures them: draft_capture_layers); each propose() feeds the committed
// positions it has not seen yet as context rows (the whole prompt the first time, in chunks of the step budget), then
// the block [last committed token, mask, ..., mask] at the positions after them, and reads the greedy token of every
// mask row. The block's K/V are overwritten by the next step's rows (nothing to roll back). All requests draft in the
// same steps.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "engine/engine.h"
#include "memory/sequence_memory.h"
#include "spec/drafter.h"

namespace rs::spec {

class DFlashDrafter final : public Drafter {
 public:
  // `drafter` runs the DFlash model and drafts for `target`, whose engine captures the layers it reads.
  DFlashDrafter(std::unique_ptr<engine::Engine> drafter, engine::Engine& target);
  void propose(std::span<DraftRequest> requests) override;
  void release(uint64_t id) override;

  const engine::Engine& engine() const { return *engine_; }
  size_t num_tracked() const { return states_.size(); }  // requests whose context the drafter holds
  int32_t block_size() const { return block_size_; }

 private:
  struct State {
    memory::SequenceMemory memory;  // pages of positions [0, seen) and of the block after them
    int64_t seen = 0;               // committed positions whose context K/V the drafter's cache holds
  };
  struct Item {
    DraftRequest* request;
    State* state;
    int64_t take;  // context rows fed in this step
    bool block;    // whether the block follows them (the request's last pass)
  };
  // One forward over `items`; fills the drafts of the items with a block.
  void run(const std::vector<Item>& items);

  std::unique_ptr<engine::Engine> engine_;
  engine::Engine& target_;
  memory::MemoryManager memory_;  // the drafter's pool: pages only (no prefix cache, no recurrent state)
  std::unordered_map<uint64_t, State> states_;
  int32_t block_size_;
  int32_t mask_token_;
  int64_t max_step_tokens_;
};

}  // namespace rs::spec
