// KvEventRecorder: the radix cache's event sink. It names pages with vLLM's block hashes (BlockHasher), turns the
// cache's reports into BlockStored / BlockRemoved / AllBlocksCleared events and hands each step's events to the
// publisher as one batch (vLLM publishes one batch per engine step). Scheduler thread only.
#pragma once

#include <functional>
#include <vector>

#include "kv_events/block_hasher.h"
#include "kv_events/event_batch.h"
#include "memory/cache_events.h"

namespace rs::kv_events {

class KvEventRecorder final : public memory::CacheEventSink {
 public:
  // publish: takes a step's batch (ZmqPublisher::publish in the server; a collector in tests).
  KvEventRecorder(BlockHasher hasher, std::function<void(EventBatch)> publish);

  memory::BlockHash hash_block(const memory::BlockHash* parent, std::span<const int32_t> tokens) override;
  void stored(const memory::BlockHash* parent, std::span<const memory::BlockHash> hashes,
              std::span<const int32_t> tokens) override;
  void removed(std::span<const memory::BlockHash> hashes) override;
  void cleared() override;
  void end_step() override;

 private:
  BlockHasher hasher_;
  std::function<void(EventBatch)> publish_;
  std::vector<KvEvent> pending_;
};

}  // namespace rs::kv_events
