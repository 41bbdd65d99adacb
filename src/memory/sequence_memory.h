// MemoryManager: the one owner of what sequences hold in a pool's memory: K/V pages of attention layers (KvManager:
// page allocators per window group and the radix cache), recurrent-state slots of gated-delta-net layers
// (StateSlotAllocator), the prefix cache's state snapshots and speculative checkpoints, and the state copies the next
// step must make first. A caller (the scheduler, a draft model's drafter) asks it whether a sequence fits, reserves
// and releases; the snapshot and checkpoint policy lives here. One thread only.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "memory/kv_manager.h"
#include "memory/slot_allocator.h"

namespace rs::memory {

// Everything one sequence holds: acquired at admission, given back by MemoryManager::release.
struct SequenceMemory {
  SeqPages kv;
  int32_t state_slot = -1;  // its recurrent state (hybrid models), -1 when none is held
  // Speculative checkpoints: checkpoints[i] keeps the recurrent state after the i-th token of a verify step (or, for
  // a drafter, after checkpoint_base + i tokens); freed when the draft is settled.
  std::vector<int32_t> checkpoints;
  int64_t checkpoint_base = 0;
  // The newest rolling snapshot of the recurrent state inside the output (prefix caching of hybrid models).
  int64_t output_snapshot_end = 0;
  int32_t output_snapshot_slot = -1;

  bool holds_pages() const { return !kv.pages.empty() || kv.locked != nullptr; }
};

struct MemoryConfig {
  bool prefix_cache = true;     // reuse cached prefixes (off: every page is freed when its sequence releases it)
  int32_t num_state_slots = 0;  // recurrent-state slots (0: the model keeps no recurrent state)
  // Hybrid models with the prefix cache: prompts keep a snapshot at their last page boundary and every this many
  // tokens (0: only there; rounded down to whole pages); outputs every 64 tokens (one rolling snapshot) and on the
  // same interval.
  int32_t state_snapshot_interval = 0;
};

// State slot copies {from, to} the next step makes before it runs, in order, and which destinations are new prefix
// cache snapshots (MemoryManager::step_failed drops those when the step never ran).
struct StepCopies {
  std::vector<std::pair<int32_t, int32_t>> copies;
  std::vector<int32_t> snapshots;
};

struct MemoryStats {
  std::vector<KvGroupStats> kv;  // per KV group
  int32_t state_slots_used = 0;  // recurrent-state slots held by sequences, checkpoints and snapshots
  int64_t state_snapshots = 0;   // of which prefix-cache snapshots
};

class MemoryManager {
 public:
  // geometry: page size and groups with their num_pages (KvPool::config()).
  MemoryManager(const KvPoolConfig& geometry, const MemoryConfig& config);
  MemoryManager(const MemoryManager&) = delete;
  MemoryManager& operator=(const MemoryManager&) = delete;

  int32_t page_size() const { return kv_.page_size(); }
  int num_groups() const { return kv_.num_groups(); }
  bool has_state() const { return slots_.num_slots() > 0; }

  // ---- admission ----
  // Takes a state slot (models with recurrent layers) and reuses the longest cached prefix of tokens[0, max_reuse)
  // (for a hybrid model one ending at a state snapshot, copied into the slot before the next step). Returns the
  // tokens reused, or -1 with nothing held when every state slot is in use.
  int64_t acquire(SequenceMemory& seq, std::span<const int32_t> tokens, int64_t max_reuse);
  // Whether a sequence of `tokens` positions whose first `reused` are held can have all its pages beside
  // `headroom_pages` more (one page of growth per running sequence), counting cached pages eviction would free.
  bool fits(int64_t tokens, int64_t reused, int64_t headroom_pages) const {
    return kv_.full_pages_for(tokens) - reused / page_size() + headroom_pages <= kv_.full_pages_available();
  }
  // Whether a sequence of `tokens` positions could ever fit the pool (with nothing else in it).
  bool could_ever_fit(int64_t tokens) const { return kv_.full_pages_for(tokens) <= kv_.full_pages_total(); }
  int64_t full_pages_for(int64_t tokens) const { return kv_.full_pages_for(tokens); }
  int64_t full_pages_available() const { return kv_.full_pages_available(); }
  int64_t full_pages_total() const { return kv_.full_pages_total(); }

  // ---- a step ----
  // Makes positions [begin, end) writable for a sequence whose K/V ends at `begin` (KvManager::reserve); returns
  // the end reserved, down to `begin` when the pool cannot supply more.
  int64_t reserve(SequenceMemory& seq, int64_t begin, int64_t end) { return kv_.reserve(seq.kv, begin, end); }
  // Where a prefill chunk [begin, end) of a sequence with `num_prompt` prompt tokens may end: `end`, or the next
  // snapshot boundary before it (a hybrid model's prefix is reusable only where a snapshot was kept).
  int64_t chunk_end(int64_t num_prompt, int64_t begin, int64_t end) const;
  // After a step computed positions [begin, end) of `tokens`: caches the prompt's pages (and a multi-token step's),
  // and keeps a snapshot of the recurrent state where the policy says.
  void commit(SequenceMemory& seq, std::span<const int32_t> tokens, int64_t num_prompt, int64_t begin, int64_t end);
  // Caches the whole pages of tokens[0, kv_len) (before a release that should leave them for reuse).
  void cache(SequenceMemory& seq, std::span<const int32_t> tokens, int64_t kv_len) {
    if (seq.holds_pages()) kv_.cache(seq.kv, tokens, kv_len);
  }
  // The copies the next step makes first (and the snapshots among them), handed over once.
  StepCopies take_step_copies();
  // The step those copies were for failed before making them: drops the snapshots that would never get their state.
  void step_failed(const StepCopies& copies);

  // ---- recurrent state and speculative checkpoints ----
  int32_t free_state_slots() const { return slots_.num_free(); }
  // Gives `seq` a state slot when it has none; false when none is free.
  bool ensure_state_slot(SequenceMemory& seq);
  // Appends a free slot to seq.checkpoints; -1 (nothing taken) when none is free. Snapshots are not evicted for it.
  int32_t take_checkpoint(SequenceMemory& seq);
  // Queues the copy of state slot `from` into `to` before the next step.
  void copy_state(int32_t from, int32_t to) { copies_.copies.emplace_back(from, to); }
  // Rolls seq's state back to checkpoint `index` (queued before the next step; the checkpoints freed later are read
  // first).
  void rollback(SequenceMemory& seq, size_t index) { copy_state(seq.checkpoints.at(index), seq.state_slot); }
  void drop_checkpoints(SequenceMemory& seq);

  // ---- the end ----
  // Drops every page reference, the state slot and the checkpoints of `seq` (pages and snapshots it left in the
  // prefix cache stay there). Pending copies into its slots are dropped: nobody will read them.
  void release(SequenceMemory& seq);
  // Drops every cached page and snapshot no sequence holds.
  void flush_cache() { kv_.flush_cache(); }
  void set_event_sink(CacheEventSink* sink) { kv_.set_event_sink(sink); }
  MemoryStats stats() const;

 private:
  bool snapshots_enabled() const { return has_state() && kv_.prefix_cache(); }
  // A free slot, dropping the least recently used snapshot when none is free; -1 when sequences hold every slot.
  int32_t take_state_slot();
  // The first snapshot boundary of a prompt of `num_prompt` tokens after `begin` (INT64_MAX when none).
  int64_t next_snapshot_boundary(int64_t num_prompt, int64_t begin) const;
  // Copies seq's state after tokens[0, end) into a free slot attached to the radix node ending there; the slot, or
  // -1 when no slot was free or a snapshot is there already.
  int32_t snapshot_state(const SequenceMemory& seq, std::span<const int32_t> tokens, int64_t end);
  // After a decode step that ends on an output snapshot boundary: caches the output's pages and snapshots the state
  // there, releasing the previous output snapshot unless it sits on a state_snapshot_interval boundary.
  void snapshot_output_state(SequenceMemory& seq, std::span<const int32_t> tokens, int64_t num_prompt, int64_t end);

  MemoryConfig config_;
  KvManager kv_;
  StateSlotAllocator slots_;
  StepCopies copies_;
};

}  // namespace rs::memory
