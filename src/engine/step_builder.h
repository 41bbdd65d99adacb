// StepBuilder: the one place that lays out a step's ForwardBatch (tokens and positions, each sequence's start and KV
// length, one page table per KV group at a common pitch, state slots, logit rows), sequence after sequence. The
// scheduler, the draft model's drafter and `bench one-batch` all build their steps with it.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/forward_batch.h"

namespace rs::engine {

class StepBuilder {
 public:
  explicit StepBuilder(int num_groups) : num_groups_(num_groups) { batch_.seq_token_start.push_back(0); }

  // Appends a sequence's `tokens` at positions [begin, begin + tokens.size()). pages[g] is its page table in KV group
  // g (entry p: the page holding positions [p * page_size, (p + 1) * page_size), -1 where absent); it must stay alive
  // until finish(). state_slot: its recurrent-state slot (models with gated-delta-net layers), else -1. Returns the
  // step row of its first token.
  int32_t add_sequence(std::span<const int32_t> tokens, int64_t begin, std::span<const std::vector<int32_t>> pages,
                       int32_t state_slot = -1);
  // A logit row at step row `row` (ascending across calls), sampled (or scored) as `sampling` says.
  void add_logit_row(int32_t row, const SamplingRow& sampling);

  int32_t num_tokens() const { return batch_.num_tokens(); }
  // The fields only some steps carry (feature rows, state copies and checkpoints).
  ForwardBatch& batch() { return batch_; }
  // Lays out the page tables (pitch: the longest sequence's table, at least min_pages) and returns the step.
  ForwardBatch finish(int32_t min_pages = 0);

 private:
  int num_groups_;
  ForwardBatch batch_;
  std::vector<std::span<const std::vector<int32_t>>> pages_;  // per sequence
};

}  // namespace rs::engine
