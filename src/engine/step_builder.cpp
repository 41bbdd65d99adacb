#include "engine/step_builder.h"

#include <algorithm>

#include "base/error.h"

namespace rs::engine {

int32_t StepBuilder::add_sequence(std::span<const int32_t> tokens, int64_t begin,
                                  std::span<const std::vector<int32_t>> pages, int32_t state_slot) {
  RS_CHECK(static_cast<int>(pages.size()) == num_groups_, "a sequence with {} page tables in a step of {} KV groups",
           pages.size(), num_groups_);
  RS_CHECK(pages_.empty() || (state_slot >= 0) == !batch_.state_slots.empty(),
           "every sequence of a step holds a state slot, or none does");
  const int32_t first = num_tokens();
  batch_.token_ids.insert(batch_.token_ids.end(), tokens.begin(), tokens.end());
  for (size_t i = 0; i < tokens.size(); ++i) batch_.positions.push_back(static_cast<int32_t>(begin + i));
  batch_.seq_token_start.push_back(num_tokens());
  batch_.seq_kv_len.push_back(static_cast<int32_t>(begin + static_cast<int64_t>(tokens.size())));
  if (state_slot >= 0) batch_.state_slots.push_back(state_slot);
  pages_.push_back(pages);
  return first;
}

void StepBuilder::add_logit_row(int32_t row, const SamplingRow& sampling) {
  RS_CHECK(row >= 0 && row < num_tokens() && (batch_.logit_rows.empty() || row > batch_.logit_rows.back()),
           "logit row {} of a step of {} tokens (rows ascend)", row, num_tokens());
  batch_.logit_rows.push_back(row);
  batch_.sampling.push_back(sampling);
}

ForwardBatch StepBuilder::finish(int32_t min_pages) {
  batch_.max_pages = min_pages;
  for (const auto& tables : pages_)
    for (const auto& table : tables) batch_.max_pages = std::max(batch_.max_pages, static_cast<int32_t>(table.size()));
  const size_t seqs = pages_.size();
  batch_.page_tables.assign(num_groups_, std::vector<int32_t>(seqs * batch_.max_pages, -1));
  for (size_t s = 0; s < seqs; ++s)
    for (int g = 0; g < num_groups_; ++g)
      std::copy(pages_[s][g].begin(), pages_[s][g].end(), batch_.page_tables[g].begin() + s * batch_.max_pages);
  if (!batch_.state_checkpoints.empty()) batch_.state_checkpoints.resize(batch_.token_ids.size(), -1);
  pages_.clear();
  return std::move(batch_);
}

}  // namespace rs::engine
