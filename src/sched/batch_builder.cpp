#include "sched/batch_builder.h"

#include <algorithm>

#include "engine/step_builder.h"

namespace rs::sched {

uint64_t sampling_seed(const Request& request) {
  if (request.sampling.seed) return *request.sampling.seed;
  uint64_t x = request.id + 0x9e3779b97f4a7c15ull;  // splitmix64: distinct ids give unrelated streams
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

engine::ForwardBatch build_forward_batch(const std::vector<StepItem>& items, int num_groups) {
  engine::StepBuilder step(num_groups);
  for (const StepItem& item : items) {
    const Sequence& seq = *item.seq;
    const std::span<const int32_t> tokens(seq.tokens.data() + item.begin, static_cast<size_t>(item.end - item.begin));
    const int32_t first_row = step.add_sequence(tokens, item.begin, seq.memory.kv.pages, seq.memory.state_slot);
    if (!seq.memory.checkpoints.empty()) {  // the state after the step's first tokens: the last committed, the drafts
      auto& checkpoints = step.batch().state_checkpoints;
      checkpoints.resize(step.num_tokens(), -1);
      std::copy(seq.memory.checkpoints.begin(), seq.memory.checkpoints.end(), checkpoints.begin() + first_row);
    }
    // Prompt logprobs: the row of each prompt position scores the prompt token after it (before any sampling row).
    for (int64_t p = 0; p < seq.scored_positions(item.begin, item.end); ++p)
      step.add_logit_row(
          first_row + static_cast<int32_t>(p),
          engine::SamplingRow{.params = &seq.request->sampling, .score_target = seq.tokens[item.begin + p + 1]});
    if (!item.samples()) continue;
    // One row for the next token and, with a draft under verification, one per draft token. The row at position
    // pos samples token pos + 1 with the output before it as its history (penalties, min_tokens and the seeded
    // stream's counter), exactly as a plain decode step at that point would.
    const int32_t last = step.num_tokens() - 1;
    for (int32_t row = last - seq.num_draft; row <= last; ++row) {
      const int64_t history = item.end - (last - row) - seq.num_prompt;
      step.add_logit_row(
          row, engine::SamplingRow{.params = &seq.request->sampling,
                                   .prompt_ids = seq.prompt_ids(),
                                   .output_ids = seq.output_ids().first(static_cast<size_t>(history)),
                                   .rng_seed = sampling_seed(*seq.request),
                                   .stop_ids = seq.request->stop_token_ids,
                                   .token_bitmask = seq.grammar_active ? std::span<const uint32_t>(seq.token_bitmask)
                                                                       : std::span<const uint32_t>()});
    }
  }
  return step.finish();
}

}  // namespace rs::sched
