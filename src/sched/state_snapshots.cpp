// Prefix caching for hybrid (gated-delta-net) models. Their recurrent state has no per-token history to share, so a
// cached prefix is reusable only where a copy of the state after it was kept: prompts are prefilled in chunks that
// end at snapshot boundaries (the prompt's last page boundary, and every state_snapshot_interval tokens; outputs: see
// snapshot_output_state), and after
// such a chunk the sequence's state slot is copied into a free slot attached to the radix node ending there. A later
// prompt sharing that prefix copies the snapshot into its own slot and starts after it. Snapshots live in the
// StatePool's spare slots, are evicted with their node or LRU-first when a running sequence needs a slot, and every
// copy runs on the device before the next step, in order (so a slot reused the same step is copied from first).
#include <algorithm>
#include <limits>

#include "base/log.h"
#include "sched/scheduler.h"

namespace rs::sched {

bool Scheduler::state_snapshots_enabled() const { return state_slots_.num_slots() > 0 && kv_.prefix_cache(); }

int32_t Scheduler::take_state_slot() {
  if (state_slots_.num_free() == 0 && !kv_.drop_lru_snapshot()) return -1;
  return state_slots_.allocate();
}

int64_t Scheduler::next_snapshot_boundary(const Sequence& seq, int64_t begin) const {
  constexpr int64_t kNone = std::numeric_limits<int64_t>::max();
  if (!state_snapshots_enabled()) return kNone;
  const int64_t page = kv_.page_size();
  // The last page boundary before the prompt's final token (an identical prompt can reuse up to there), and the
  // multiples of the interval before it; none past it (the prompt's last chunk samples, and outputs are not kept).
  const int64_t last = (seq.num_prompt - 1) / page * page;
  const int64_t interval = config_.state_snapshot_interval / page * page;
  const int64_t next = interval > 0 ? std::min(last, (begin / interval + 1) * interval) : last;
  return next > begin ? next : kNone;
}

int64_t Scheduler::chunk_end_for_snapshot(const Sequence& seq, int64_t begin, int64_t end) const {
  return std::min(end, next_snapshot_boundary(seq, begin));
}

int32_t Scheduler::snapshot_state(const Sequence& seq) {
  const int64_t end = seq.kv_len;
  const int32_t slot = take_state_slot();
  if (slot < 0) return -1;                            // running sequences hold every slot: no snapshot this time
  if (!kv_.attach_snapshot(seq.tokens, end, slot)) {  // one exists there already (or the pages are not cached)
    state_slots_.free(slot);
    return -1;
  }
  pending_state_copies_.emplace_back(seq.memory.state_slot, slot);
  pending_snapshots_.push_back(slot);
  RS_LOG_DEBUG("rid={} recurrent state after {} tokens kept in slot {}", seq.request->id, end, slot);
  return slot;
}

// Outputs: a multi-turn conversation sends the previous reply back as part of the next prompt, so the state is kept
// in the output every kOutputSnapshotStride tokens (one rolling snapshot per sequence) and, like prompts, every
// state_snapshot_interval tokens. The snapshot left when the sequence finishes lets the next turn resume at most a
// stride before the reply's end. The stride bounds the cost of each: a radix insert and two prefix walks on the
// scheduler thread, a node in the tree and a state copy on the device.
constexpr int64_t kOutputSnapshotStride = 64;

void Scheduler::snapshot_output_state(Sequence& seq) {
  const int64_t end = seq.kv_len, page = kv_.page_size();
  const int64_t stride = std::max(page, kOutputSnapshotStride / page * page);
  if (!state_snapshots_enabled() || seq.memory.state_slot < 0 || end <= seq.num_prompt || end % stride != 0) return;
  kv_.cache(seq.memory.kv, seq.tokens, end);
  // The previous rolling snapshot goes first, so that its slot serves the new one rather than another snapshot
  // being evicted for it.
  const int64_t interval = config_.state_snapshot_interval / page * page;
  const bool keep_previous = interval > 0 && seq.output_snapshot_end % interval == 0;
  if (seq.output_snapshot_slot >= 0 && !keep_previous)
    kv_.drop_snapshot_at(seq.tokens, seq.output_snapshot_end, seq.output_snapshot_slot);
  seq.output_snapshot_slot = snapshot_state(seq);
  seq.output_snapshot_end = end;
}

}  // namespace rs::sched
