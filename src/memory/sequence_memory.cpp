// Prefix caching for hybrid (gated-delta-net) models. Their recurrent state has no per-token history to share, so a
// cached prefix is reusable only where a copy of the state after it was kept: prompts are prefilled in chunks that
// end at snapshot boundaries (the prompt's last page boundary, and every state_snapshot_interval tokens; outputs: see
// snapshot_output_state), and after such a chunk the sequence's state slot is copied into a free slot attached to the
// radix node ending there. A later prompt sharing that prefix copies the snapshot into its own slot and starts after
// it. Snapshots live in the spare slots, are evicted with their node or LRU-first when a sequence needs a slot, and
// every copy runs on the device before the next step, in order (so a slot reused the same step is copied from first).
#include "memory/sequence_memory.h"

#include <algorithm>
#include <limits>

#include "base/log.h"

namespace rs::memory {

MemoryManager::MemoryManager(const KvPoolConfig& geometry, const MemoryConfig& config)
    : config_(config), kv_(geometry, config.prefix_cache), slots_(config.num_state_slots) {
  kv_.set_snapshot_release([this](int32_t slot) { slots_.free(slot); });
}

int64_t MemoryManager::acquire(SequenceMemory& seq, std::span<const int32_t> tokens, int64_t max_reuse) {
  int32_t slot = -1;
  if (has_state() && (slot = take_state_slot()) < 0) return -1;  // a running sequence frees one when it ends
  int32_t snapshot = -1;
  const int64_t reused = kv_.match(seq.kv, tokens, max_reuse, has_state() ? &snapshot : nullptr);
  // The slot starts as the snapshot's copy (made before the step), or the model zeroes it (a start at position 0).
  seq.state_slot = slot;
  if (snapshot >= 0) copy_state(snapshot, slot);
  return reused;
}

int64_t MemoryManager::chunk_end(int64_t num_prompt, int64_t begin, int64_t end) const {
  return std::min(end, next_snapshot_boundary(num_prompt, begin));
}

void MemoryManager::commit(SequenceMemory& seq, std::span<const int32_t> tokens, int64_t num_prompt, int64_t begin,
                           int64_t end) {
  // Share prompt pages early (and before a snapshot attaches to them). A one-token chunk is prefill too: the chunk
  // before a snapshot boundary can end one token short of it (prompt 300, page 16, chunks of 7: 287 -> 288).
  if (begin < num_prompt || end - begin > 1) kv_.cache(seq.kv, tokens, end);
  if (seq.state_slot >= 0 && next_snapshot_boundary(num_prompt, begin) == end) snapshot_state(seq, tokens, end);
  if (begin >= num_prompt) snapshot_output_state(seq, tokens, num_prompt, end);  // a decode step
}

StepCopies MemoryManager::take_step_copies() {
  StepCopies out = std::move(copies_);
  copies_ = {};
  return out;
}

void MemoryManager::step_failed(const StepCopies& copies) {
  for (int32_t slot : copies.snapshots) kv_.drop_snapshot(slot);  // perhaps never copied
}

bool MemoryManager::ensure_state_slot(SequenceMemory& seq) {
  if (seq.state_slot < 0) seq.state_slot = slots_.allocate();
  return seq.state_slot >= 0;
}

int32_t MemoryManager::take_checkpoint(SequenceMemory& seq) {
  const int32_t slot = slots_.allocate();
  if (slot >= 0) seq.checkpoints.push_back(slot);
  return slot;
}

void MemoryManager::drop_checkpoints(SequenceMemory& seq) {
  for (int32_t slot : seq.checkpoints) slots_.free(slot);
  seq.checkpoints.clear();
}

void MemoryManager::release(SequenceMemory& seq) {
  const auto released = [&](int32_t slot) {
    return slot == seq.state_slot ||
           std::find(seq.checkpoints.begin(), seq.checkpoints.end(), slot) != seq.checkpoints.end();
  };
  std::erase_if(copies_.copies, [&](const std::pair<int32_t, int32_t>& copy) { return released(copy.second); });
  drop_checkpoints(seq);
  if (seq.holds_pages()) kv_.release(seq.kv);
  if (seq.state_slot >= 0) slots_.free(seq.state_slot);
  seq.state_slot = -1;
  seq.output_snapshot_slot = -1;  // it stays in the prefix cache, no longer replaced
}

MemoryStats MemoryManager::stats() const {
  return MemoryStats{.kv = kv_.stats(), .state_slots_used = slots_.num_used(), .state_snapshots = kv_.num_snapshots()};
}

int32_t MemoryManager::take_state_slot() {
  if (slots_.num_free() == 0 && !kv_.drop_lru_snapshot()) return -1;
  return slots_.allocate();
}

int64_t MemoryManager::next_snapshot_boundary(int64_t num_prompt, int64_t begin) const {
  constexpr int64_t kNone = std::numeric_limits<int64_t>::max();
  if (!snapshots_enabled()) return kNone;
  const int64_t page = page_size();
  // The last page boundary before the prompt's final token (an identical prompt can reuse up to there), and the
  // multiples of the interval before it; none past it (the prompt's last chunk samples, and outputs are not kept).
  const int64_t last = (num_prompt - 1) / page * page;
  const int64_t interval = config_.state_snapshot_interval / page * page;
  const int64_t next = interval > 0 ? std::min(last, (begin / interval + 1) * interval) : last;
  return next > begin ? next : kNone;
}

int32_t MemoryManager::snapshot_state(const SequenceMemory& seq, std::span<const int32_t> tokens, int64_t end) {
  const int32_t slot = take_state_slot();
  if (slot < 0) return -1;                        // running sequences hold every slot: no snapshot this time
  if (!kv_.attach_snapshot(tokens, end, slot)) {  // one exists there already (or the pages are not cached)
    slots_.free(slot);
    return -1;
  }
  copy_state(seq.state_slot, slot);
  copies_.snapshots.push_back(slot);
  RS_LOG_DEBUG("recurrent state after {} tokens kept in slot {}", end, slot);
  return slot;
}

// Outputs: a multi-turn conversation sends the previous reply back as part of the next prompt, so the state is kept
// in the output every kOutputSnapshotStride tokens (one rolling snapshot per sequence) and, like prompts, every
// state_snapshot_interval tokens. The snapshot left when the sequence finishes lets the next turn resume at most a
// stride before the reply's end. The stride bounds the cost of each: a radix insert and two prefix walks on the
// scheduler thread, a node in the tree and a state copy on the device.
constexpr int64_t kOutputSnapshotStride = 64;

void MemoryManager::snapshot_output_state(SequenceMemory& seq, std::span<const int32_t> tokens, int64_t num_prompt,
                                          int64_t end) {
  const int64_t page = page_size();
  const int64_t stride = std::max(page, kOutputSnapshotStride / page * page);
  if (!snapshots_enabled() || seq.state_slot < 0 || end <= num_prompt || end % stride != 0) return;
  kv_.cache(seq.kv, tokens, end);
  // The previous rolling snapshot goes first, so that its slot serves the new one rather than another snapshot
  // being evicted for it.
  const int64_t interval = config_.state_snapshot_interval / page * page;
  const bool keep_previous = interval > 0 && seq.output_snapshot_end % interval == 0;
  if (seq.output_snapshot_slot >= 0 && !keep_previous)
    kv_.drop_snapshot_at(tokens, seq.output_snapshot_end, seq.output_snapshot_slot);
  seq.output_snapshot_slot = snapshot_state(seq, tokens, end);
  seq.output_snapshot_end = end;
}

}  // namespace rs::memory
