// Speculative decoding inside the step: the drafter's proposals appended to the decode items of sequences that may
// draft (pages for them only if free now, a recurrent-state checkpoint per draft token on hybrid models), and after
// the step the accepted prefix kept, the rest removed and recurrent state rolled back to the last accepted token.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/forward_batch.h"
#include "memory/sequence_memory.h"
#include "sched/batch_builder.h"
#include "sched/sequence.h"
#include "spec/drafter.h"
#include "spec/speculative_config.h"

namespace rs::sched {

class SpeculationStage {
 public:
  // Without a drafter nothing is ever proposed. feature_group: EAGLE-3's KV group whose pages locate a sequence's
  // target features (-1: none).
  SpeculationStage(const spec::SpeculativeConfig& policy, std::unique_ptr<spec::Drafter> drafter, int32_t feature_group,
                   int64_t context_length);

  // Appends the drafter's proposal to the decode items of sequences that draft this step (at most policy.max_batch
  // decodes; none constrained by a grammar), within each sequence's max_new_tokens and the context.
  // Returns whether the drafter was asked (and so whether this step's time includes a proposal).
  bool propose(std::vector<StepItem>& items, memory::MemoryManager& memory);
  // After a verify step: the draft tokens of `seq` the target accepted (its samples are output rows
  // [row, row + num_draft + 1)). Removes the draft from seq.tokens, rolls recurrent state back and records the
  // acceptance; the caller appends the accepted tokens and the target's next one.
  int32_t settle(Sequence& seq, const engine::StepOutput& output, size_t row, memory::MemoryManager& memory);
  // Removes a sequence's unverified draft from its tokens (a failed step) and frees its checkpoints.
  static void drop_draft(Sequence& seq, memory::MemoryManager& memory);
  // The sequence left: the drafter forgets what it kept for it.
  void release(uint64_t request_id) {
    if (drafter_) drafter_->release(request_id);
  }

 private:
  spec::SpeculativeConfig policy_;
  std::unique_ptr<spec::Drafter> drafter_;
  int32_t feature_group_;
  int64_t context_length_;
};

}  // namespace rs::sched
