#include "engine/step_staging.h"

#include <algorithm>
#include <cstring>

namespace rs::engine {

StepStaging::StepStaging(Backend& backend, const memory::KvPool& kv, int64_t context_length)
    : backend_(backend),
      kv_(kv),
      context_length_(context_length),
      page_pitch_(static_cast<int32_t>(context_length / kv.page_size() + 1)) {}

size_t StepStaging::int32s_for(int32_t tokens, int32_t seqs, int32_t rows) const {
  // token ids, positions, token_seq [T] | logit rows [R] | kv lengths [S] | first tokens [S + 1] | state slots [S] |
  // state checkpoints [T] | feature rows [T] | per group: slots [T], page table [S, pitch] | feature tokens [T]
  // (DFlash steps only: last, so that every other step's layout is the same with or without them)
  const size_t groups = static_cast<size_t>(kv_.num_groups());
  return 6 * static_cast<size_t>(tokens) + rows + 3 * static_cast<size_t>(seqs) + 1 +
         groups * (tokens + static_cast<size_t>(seqs) * page_pitch_);
}

void StepStaging::reserve(const ForwardBatch& batch, int32_t padded_seqs) {
  const int32_t pad = std::max(0, padded_seqs - batch.num_seqs());
  if (batch.max_pages > page_pitch_) {
    page_pitch_ = batch.max_pages;
    ++epoch_;
  }
  reserve(batch.num_tokens() + pad, batch.num_seqs() + pad, static_cast<int32_t>(batch.logit_rows.size()) + pad);
}

void StepStaging::reserve(int32_t tokens, int32_t seqs, int32_t rows) {
  const size_t bytes = int32s_for(tokens, seqs, rows) * sizeof(int32_t);
  if (bytes <= device_.bytes()) return;
  const size_t grown = std::max(bytes, device_.bytes() + device_.bytes() / 2);
  backend_.synchronize();  // the old buffers may still be read by work in flight
  host_ = backend_.alloc_host(grown);
  device_ = backend_.alloc(grown);
  ++epoch_;
}

model::StepInputs StepStaging::upload(const ForwardBatch& batch, int32_t padded_seqs, int32_t max_kv_len_bound) {
  const int32_t seqs = batch.num_seqs(), real_tokens = batch.num_tokens();
  const int32_t real_rows = static_cast<int32_t>(batch.logit_rows.size());
  const int32_t pad = std::max(0, padded_seqs - seqs);
  const int32_t tokens = real_tokens + pad, rows = real_rows + pad, all_seqs = seqs + pad;
  const int32_t page_size = kv_.page_size();
  RS_CHECK(tokens > 0 && static_cast<int32_t>(batch.seq_token_start.size()) == seqs + 1 &&
               batch.seq_token_start.front() == 0 && batch.seq_token_start.back() == real_tokens &&
               static_cast<int32_t>(batch.positions.size()) == real_tokens,
           "malformed batch: {} tokens, {} sequences", real_tokens, seqs);
  RS_CHECK(static_cast<int>(batch.page_tables.size()) == kv_.num_groups(), "batch has {} page tables for {} KV groups",
           batch.page_tables.size(), kv_.num_groups());
  reserve(batch, padded_seqs);

  int32_t* cursor = static_cast<int32_t*>(host_.data());
  const auto take = [&](size_t count) {
    int32_t* p = cursor;
    cursor += count;
    return p;
  };
  int32_t* ids = take(tokens);
  int32_t* positions = take(tokens);
  int32_t* token_seq = take(tokens);
  int32_t* logit_rows = take(rows);
  int32_t* kv_len = take(all_seqs);
  int32_t* seq_start = take(all_seqs + 1);
  int32_t* state_slots = take(all_seqs);
  RS_CHECK(batch.state_slots.empty() || static_cast<int32_t>(batch.state_slots.size()) == seqs,
           "batch has {} state slots for {} sequences", batch.state_slots.size(), seqs);
  for (int32_t s = 0; s < seqs; ++s) state_slots[s] = batch.state_slots.empty() ? -1 : batch.state_slots[s];
  int32_t* checkpoints = take(tokens);
  const bool has_checkpoints = !batch.state_checkpoints.empty();
  RS_CHECK(!has_checkpoints || static_cast<int32_t>(batch.state_checkpoints.size()) == real_tokens,
           "batch has {} state checkpoints for {} tokens", batch.state_checkpoints.size(), real_tokens);
  std::fill(checkpoints, checkpoints + tokens, -1);
  if (has_checkpoints) std::copy(batch.state_checkpoints.begin(), batch.state_checkpoints.end(), checkpoints);
  int32_t* feature_rows = take(tokens);
  const bool has_features = !batch.feature_rows.empty();
  const bool per_token = batch.feature_tokens.empty();  // EAGLE-3: one per token; DFlash: context rows only
  const int32_t num_features = per_token ? tokens : static_cast<int32_t>(batch.feature_rows.size());
  if (per_token) {
    RS_CHECK(!has_features || static_cast<int32_t>(batch.feature_rows.size()) == real_tokens,
             "batch has {} feature rows for {} tokens", batch.feature_rows.size(), real_tokens);
  } else {
    RS_CHECK(batch.feature_tokens.size() == batch.feature_rows.size() && num_features <= real_tokens,
             "batch has {} feature rows for {} feature tokens of {} tokens", batch.feature_rows.size(),
             batch.feature_tokens.size(), real_tokens);
    for (int32_t row : batch.feature_tokens)
      RS_CHECK(row >= 0 && row < real_tokens, "feature token row {} outside the step's {} tokens", row, real_tokens);
  }
  std::fill(feature_rows, feature_rows + tokens, 0);
  if (has_features) std::copy(batch.feature_rows.begin(), batch.feature_rows.end(), feature_rows);
  std::copy(batch.token_ids.begin(), batch.token_ids.end(), ids);
  std::copy(batch.positions.begin(), batch.positions.end(), positions);
  std::copy(batch.logit_rows.begin(), batch.logit_rows.end(), logit_rows);
  std::copy(batch.seq_kv_len.begin(), batch.seq_kv_len.end(), kv_len);
  std::copy(batch.seq_token_start.begin(), batch.seq_token_start.end(), seq_start);
  int32_t max_kv_len = 0;
  for (int32_t s = 0; s < seqs; ++s) {
    RS_CHECK(batch.seq_token_start[s] < batch.seq_token_start[s + 1], "sequence {} has no tokens", s);
    for (int32_t t = batch.seq_token_start[s]; t < batch.seq_token_start[s + 1]; ++t) token_seq[t] = s;
    max_kv_len = std::max(max_kv_len, batch.seq_kv_len[s]);
  }
  RS_CHECK(max_kv_len <= context_length_, "sequence of {} tokens exceeds the context length {}", max_kv_len,
           context_length_);
  for (int32_t i = 0; i < pad; ++i) {  // idle decode rows
    ids[real_tokens + i] = 0;
    positions[real_tokens + i] = 0;
    token_seq[real_tokens + i] = seqs + i;
    logit_rows[real_rows + i] = real_tokens + i;
    kv_len[seqs + i] = 1;
    seq_start[seqs + i + 1] = real_tokens + i + 1;
    state_slots[seqs + i] = -1;  // reads and writes no recurrent state
  }

  std::vector<int32_t*> slots(kv_.num_groups()), tables(kv_.num_groups());
  for (int g = 0; g < kv_.num_groups(); ++g) {
    slots[g] = take(tokens);
    tables[g] = take(static_cast<size_t>(all_seqs) * page_pitch_);
    const auto& table = batch.page_tables[g];
    RS_CHECK(static_cast<int64_t>(table.size()) == static_cast<int64_t>(seqs) * batch.max_pages,
             "page table {} has {} entries for {} x {}", g, table.size(), seqs, batch.max_pages);
    const int64_t num_pages = kv_.group(g).num_pages;
    const int32_t window = kv_.group(g).window;
    for (int32_t s = 0; s < seqs; ++s) {
      const int32_t* row = table.data() + static_cast<int64_t>(s) * batch.max_pages;
      std::copy(row, row + batch.max_pages, tables[g] + static_cast<int64_t>(s) * page_pitch_);
      // Every page a token of this step may read must be present: attention does not check in release builds.
      const int32_t first_read = window > 0 ? std::max(0, batch.positions[batch.seq_token_start[s]] - window + 1) : 0;
      RS_CHECK((batch.seq_kv_len[s] + page_size - 1) / page_size <= batch.max_pages,
               "sequence {} of {} tokens does not fit a page table of {} pages", s, batch.seq_kv_len[s],
               batch.max_pages);
      for (int32_t p = first_read / page_size; p * page_size < batch.seq_kv_len[s]; ++p)
        RS_CHECK(row[p] >= 0 && row[p] < num_pages,
                 "sequence {} reads KV page {} of group {} (positions from {}), which is absent", s, p, g, first_read);
    }
    for (int32_t t = 0; t < real_tokens; ++t) {
      const int32_t pos = batch.positions[t], page_index = pos / page_size;
      RS_CHECK(pos >= 0 && page_index < batch.max_pages, "position {} beyond the page table", pos);
      const int32_t page = table[static_cast<int64_t>(token_seq[t]) * batch.max_pages + page_index];
      RS_CHECK(page >= 0 && page < num_pages, "token at position {} has no KV page in group {}", pos, g);
      slots[g][t] = page * page_size + pos % page_size;
    }
    for (int32_t i = 0; i < pad; ++i) {
      slots[g][real_tokens + i] = -1;  // writes nothing
      tables[g][static_cast<int64_t>(seqs + i) * page_pitch_] = 0;
    }
  }

  int32_t* feature_tokens = nullptr;
  if (!per_token) {
    feature_tokens = take(tokens);
    std::copy(batch.feature_tokens.begin(), batch.feature_tokens.end(), feature_tokens);
  }

  // One copy of exactly the bytes written, to the same offsets in the device buffer.
  const auto* host_base = static_cast<int32_t*>(host_.data());
  const size_t used = static_cast<size_t>(cursor - host_base);
  auto* device_base = static_cast<int32_t*>(device_.data());
  backend_.copy(Tensor(device_base, DType::kI32, {static_cast<int64_t>(used)}, backend_.device()),
                Tensor(host_.data(), DType::kI32, {static_cast<int64_t>(used)}));
  const Device device = backend_.device();
  const auto on_device = [&](const int32_t* host_ptr, std::initializer_list<int64_t> shape) {
    return Tensor(device_base + (host_ptr - host_base), DType::kI32, shape, device);
  };
  model::StepInputs inputs;
  inputs.token_ids = on_device(ids, {tokens});
  inputs.logit_rows = on_device(logit_rows, {rows});
  const Tensor positions_d = on_device(positions, {tokens});
  const Tensor token_seq_d = on_device(token_seq, {tokens});
  const Tensor kv_len_d = on_device(kv_len, {all_seqs});
  const Tensor seq_start_d = on_device(seq_start, {all_seqs + 1});
  inputs.state = StateBatchView{positions_d, seq_start_d, on_device(state_slots, {all_seqs}), all_seqs,
                                has_checkpoints ? on_device(checkpoints, {tokens}) : Tensor()};
  if (has_features) inputs.feature_rows = on_device(feature_rows, {num_features});
  if (has_features && !per_token) inputs.feature_tokens = on_device(feature_tokens, {num_features});
  inputs.features_from_target = batch.features_from_target;
  for (int g = 0; g < kv_.num_groups(); ++g)
    inputs.groups.push_back(BatchView{positions_d, token_seq_d, kv_len_d, on_device(tables[g], {all_seqs, page_pitch_}),
                                      on_device(slots[g], {tokens}), page_size, all_seqs,
                                      std::max(max_kv_len, max_kv_len_bound), seq_start_d});
  inputs.taps = taps_;
  return inputs;
}

}  // namespace rs::engine
