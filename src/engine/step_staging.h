// StepStaging: one step's metadata (token ids, logit rows, positions, sequence of each token, KV lengths, and per KV
// group the cache slots and page tables) checked, packed into one pinned host buffer and uploaded with one copy into a
// persistent device buffer. Offsets depend only on the step's counts and a fixed page-table pitch, so two steps of the
// same shape read the same device addresses: a recorded decode graph replays over whatever the last upload wrote.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/forward_batch.h"
#include "memory/kv_pool.h"
#include "model/model.h"

namespace rs::engine {

class StepStaging {
 public:
  StepStaging(Backend& backend, const memory::KvPool& kv, int64_t context_length);

  // Grows buffers and the page-table pitch for `batch` padded to `padded_seqs` decode rows (see upload).
  void reserve(const ForwardBatch& batch, int32_t padded_seqs);
  // Grows buffers for steps of up to these counts (page tables at the current pitch).
  void reserve(int32_t tokens, int32_t seqs, int32_t rows);
  // Validates `batch` against the pool (every page a token reads is present), writes its metadata and uploads it.
  // padded_seqs > batch.num_seqs() appends idle decode rows (token 0 at position 0 reading page 0, writing no KV,
  // with a logit row each) so a batch fits a graph recorded for padded_seqs rows. max_kv_len_bound: the attention
  // key-range bound the kernels plan for (a graph's bound must not depend on the batch: pass the context length).
  // The host buffer is rewritten by the next upload: the caller synchronises the backend in between.
  model::StepInputs upload(const ForwardBatch& batch, int32_t padded_seqs, int32_t max_kv_len_bound);
  // Changes whenever the device buffer moves or the page-table pitch changes (graphs must then be recaptured).
  uint64_t epoch() const { return epoch_; }
  // EAGLE-3 targets: every step's inputs name these hidden-state taps (null: none). Must outlive the staging.
  void set_hidden_taps(const model::HiddenTaps* taps) { taps_ = taps; }
  int32_t page_pitch() const { return page_pitch_; }

 private:
  size_t int32s_for(int32_t tokens, int32_t seqs, int32_t rows) const;

  Backend& backend_;
  const memory::KvPool& kv_;
  int64_t context_length_;
  int32_t page_pitch_;  // entries per page-table row (>= any batch's max_pages)
  Buffer host_, device_;
  uint64_t epoch_ = 0;
  const model::HiddenTaps* taps_ = nullptr;
};

}  // namespace rs::engine
