// Turns the scheduler's plan for one step (which token range of which sequence) into an engine ForwardBatch.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/forward_batch.h"
#include "sched/sequence.h"

namespace rs::sched {

// One sequence's share of a step: positions [begin, end) are computed; when end reaches the sequence's last token
// the step samples its next token.
struct StepItem {
  Sequence* seq = nullptr;
  int64_t begin = 0;
  int64_t end = 0;

  bool samples() const { return end == seq->num_tokens(); }
};

// Builds flat token/position arrays, one page table per KV group, and a sampling row per sampling item.
// The batch points into the sequences (spans, params): they must outlive it.
engine::ForwardBatch build_forward_batch(const std::vector<StepItem>& items, int num_groups);

// The seed of a request's sampling stream: the request's seed when given, else one derived from its id.
uint64_t sampling_seed(const Request& request);

}  // namespace rs::sched
