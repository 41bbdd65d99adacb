#include "sched/batch_builder.h"

#include <algorithm>

namespace rs::sched {

uint64_t sampling_seed(const Request& request) {
  if (request.sampling.seed) return *request.sampling.seed;
  uint64_t x = request.id + 0x9e3779b97f4a7c15ull;  // splitmix64: distinct ids give unrelated streams
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

engine::ForwardBatch build_forward_batch(const std::vector<StepItem>& items, int num_groups) {
  engine::ForwardBatch batch;
  batch.seq_token_start.push_back(0);
  for (const StepItem& item : items) {
    const Sequence& seq = *item.seq;
    for (int64_t pos = item.begin; pos < item.end; ++pos) {
      batch.token_ids.push_back(seq.tokens[pos]);
      batch.positions.push_back(static_cast<int32_t>(pos));
    }
    batch.seq_token_start.push_back(batch.num_tokens());
    batch.seq_kv_len.push_back(static_cast<int32_t>(item.end));
    if (seq.memory.state_slot >= 0) batch.state_slots.push_back(seq.memory.state_slot);
    if (!seq.draft_checkpoints.empty()) {  // the state after the step's first tokens: the last committed, the drafts
      batch.state_checkpoints.resize(batch.token_ids.size(), -1);
      const size_t first = batch.token_ids.size() - static_cast<size_t>(item.end - item.begin);
      std::copy(seq.draft_checkpoints.begin(), seq.draft_checkpoints.end(), batch.state_checkpoints.begin() + first);
    }
    for (const auto& pages : seq.memory.kv.pages)
      batch.max_pages = std::max(batch.max_pages, static_cast<int32_t>(pages.size()));
    // Prompt logprobs: the row of each prompt position scores the prompt token after it (before any sampling row).
    const int32_t first_row = batch.num_tokens() - static_cast<int32_t>(item.end - item.begin);
    for (int64_t p = 0; p < seq.scored_positions(item.begin, item.end); ++p) {
      batch.logit_rows.push_back(first_row + static_cast<int32_t>(p));
      batch.sampling.push_back(
          engine::SamplingRow{.params = &seq.request->sampling, .score_target = seq.tokens[item.begin + p + 1]});
    }
    if (item.samples()) {
      // One row for the next token and, with a draft under verification, one per draft token. The row at position
      // pos samples token pos + 1 with the output before it as its history (penalties, min_tokens and the seeded
      // stream's counter), exactly as a plain decode step at that point would.
      const int32_t last = batch.num_tokens() - 1;
      for (int32_t row = last - seq.num_draft; row <= last; ++row) {
        const int64_t history = item.end - (last - row) - seq.num_prompt;
        batch.logit_rows.push_back(row);
        batch.sampling.push_back(engine::SamplingRow{.params = &seq.request->sampling,
                                                     .prompt_ids = seq.prompt_ids(),
                                                     .output_ids = seq.output_ids().first(static_cast<size_t>(history)),
                                                     .rng_seed = sampling_seed(*seq.request),
                                                     .stop_ids = seq.request->stop_token_ids,
                                                     .token_bitmask = seq.grammar_active
                                                                          ? std::span<const uint32_t>(seq.token_bitmask)
                                                                          : std::span<const uint32_t>()});
      }
    }
  }
  if (!batch.state_checkpoints.empty()) batch.state_checkpoints.resize(batch.token_ids.size(), -1);
  RS_CHECK(batch.state_slots.empty() || batch.state_slots.size() == items.size(),
           "{} of {} sequences hold a state slot", batch.state_slots.size(), items.size());
  batch.page_tables.assign(num_groups, std::vector<int32_t>(items.size() * batch.max_pages, -1));
  for (size_t s = 0; s < items.size(); ++s)
    for (int g = 0; g < num_groups; ++g) {
      const auto& pages = items[s].seq->memory.kv.pages[g];
      std::copy(pages.begin(), pages.end(), batch.page_tables[g].begin() + s * batch.max_pages);
    }
  return batch;
}

}  // namespace rs::sched
