#include "engine/single_sequence.h"

#include <algorithm>

namespace rs::engine {

SingleSequence::SingleSequence(Engine& engine) : engine_(engine) {
  max_pages_ = static_cast<int32_t>(engine.context_length() / engine.kv_pool().page_size() + 1);
}

SampledToken SingleSequence::feed(std::span<const int32_t> ids, const SamplingRow& sampling,
                                  std::vector<float>* logits) {
  RS_CHECK(!ids.empty(), "feed needs at least one token");
  RS_CHECK(length_ + static_cast<int64_t>(ids.size()) <= engine_.context_length(),
           "sequence of {} tokens exceeds the context length {}", length_ + ids.size(), engine_.context_length());
  const int32_t page_size = engine_.kv_pool().page_size();
  const int32_t first_new_page = length_ / page_size;
  ForwardBatch batch;
  batch.token_ids.assign(ids.begin(), ids.end());
  for (size_t i = 0; i < ids.size(); ++i) batch.positions.push_back(length_ + static_cast<int32_t>(i));
  length_ += static_cast<int32_t>(ids.size());
  batch.seq_token_start = {0, static_cast<int32_t>(ids.size())};
  batch.seq_kv_len = {length_};
  batch.max_pages = max_pages_;
  const int32_t used = (length_ + page_size - 1) / page_size;
  for (int g = 0; g < engine_.kv_pool().num_groups(); ++g) {
    const kv::KvGroup& group = engine_.kv_pool().group(g);
    const int32_t window_pages = (group.window + page_size - 1) / page_size;
    RS_CHECK(group.window == 0 || used - (first_new_page - window_pages) <= group.num_pages,
             "step of {} tokens needs more pages than window group {} has ({})", ids.size(), g, group.num_pages);
    std::vector<int32_t> table(max_pages_, -1);
    for (int32_t p = 0; p < used; ++p) {
      if (group.window == 0) {
        table[p] = p;
      } else if (p >= first_new_page - window_pages) {
        table[p] = static_cast<int32_t>(p % group.num_pages);
      }
    }
    batch.page_tables.push_back(std::move(table));
  }
  if (engine_.state_pool().num_slots() > 0) batch.state_slots = {0};  // the one sequence owns slot 0
  batch.logit_rows = {static_cast<int32_t>(ids.size()) - 1};
  batch.sampling = {sampling};
  StepOutput out = engine_.forward(batch, logits != nullptr);
  if (logits) *logits = std::move(out.logits);
  return out.tokens.at(0);
}

SampledToken SingleSequence::prefill(std::span<const int32_t> ids, const SamplingRow& sampling, int32_t max_chunk,
                                     std::vector<float>* logits) {
  RS_CHECK(max_chunk > 0, "chunk size must be positive");
  SampledToken last;
  for (size_t begin = 0; begin < ids.size(); begin += max_chunk) {
    const size_t end = std::min(ids.size(), begin + static_cast<size_t>(max_chunk));
    last = feed(ids.subspan(begin, end - begin), sampling, end == ids.size() ? logits : nullptr);
  }
  return last;
}

}  // namespace rs::engine
