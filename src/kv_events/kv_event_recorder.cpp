#include "kv_events/kv_event_recorder.h"

#include <chrono>

namespace rs::kv_events {

KvEventRecorder::KvEventRecorder(BlockHasher hasher, std::function<void(EventBatch)> publish)
    : hasher_(std::move(hasher)), publish_(std::move(publish)) {}

memory::BlockHash KvEventRecorder::hash_block(const memory::BlockHash* parent, std::span<const int32_t> tokens) {
  return hasher_.hash(parent, tokens);
}

void KvEventRecorder::stored(const memory::BlockHash* parent, std::span<const memory::BlockHash> hashes,
                             std::span<const int32_t> tokens) {
  if (hashes.empty()) return;
  BlockStored event;
  event.block_hashes.assign(hashes.begin(), hashes.end());
  if (parent) event.parent_block_hash = *parent;
  event.token_ids.assign(tokens.begin(), tokens.end());
  event.block_size = static_cast<int32_t>(tokens.size() / hashes.size());  // the page size
  pending_.emplace_back(std::move(event));
}

void KvEventRecorder::removed(std::span<const memory::BlockHash> hashes) {
  if (hashes.empty()) return;
  // Consecutive removals within a step (eviction frees leaf after leaf) travel as one event.
  if (!pending_.empty())
    if (auto* last = std::get_if<BlockRemoved>(&pending_.back())) {
      last->block_hashes.insert(last->block_hashes.end(), hashes.begin(), hashes.end());
      return;
    }
  pending_.emplace_back(BlockRemoved{{hashes.begin(), hashes.end()}});
}

void KvEventRecorder::cleared() { pending_.emplace_back(AllBlocksCleared{}); }

void KvEventRecorder::end_step() {
  if (pending_.empty()) return;
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  publish_(EventBatch{now, std::move(pending_)});
  pending_.clear();
}

}  // namespace rs::kv_events
