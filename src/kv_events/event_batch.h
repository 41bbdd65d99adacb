// KV cache events and their wire form: vLLM's EventBatch of tagged, array-like events (vllm/distributed/
// kv_events.py), msgpack-encoded with msgpack-cxx:
//   EventBatch       [ts: float, events: [...], data_parallel_rank: int]
//   BlockStored      ["BlockStored", block_hashes, parent_block_hash | nil, token_ids, block_size, lora_id: nil,
//                     medium, lora_name: nil]
//   BlockRemoved     ["BlockRemoved", block_hashes, medium]
//   AllBlocksCleared ["AllBlocksCleared"]
// Block hashes go out as vLLM's ExternalBlockHash: the digest's low 64 bits as an unsigned integer (vLLM's default),
// or the 32 raw bytes (VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=0).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "memory/cache_events.h"

namespace rs::kv_events {

struct BlockStored {
  std::vector<memory::BlockHash> block_hashes;
  std::optional<memory::BlockHash> parent_block_hash;
  std::vector<int32_t> token_ids;  // block_hashes.size() * block_size
  int32_t block_size = 0;
};
struct BlockRemoved {
  std::vector<memory::BlockHash> block_hashes;
};
struct AllBlocksCleared {};
using KvEvent = std::variant<BlockStored, BlockRemoved, AllBlocksCleared>;

struct EventBatch {
  double ts = 0;  // seconds since the Unix epoch
  std::vector<KvEvent> events;
};

struct WireOptions {
  std::string medium = "GPU";  // where the blocks live: "GPU" (CUDA backend) or "CPU"
  bool int_hashes = true;
  int32_t data_parallel_rank = 0;
};

// The msgpack payload (the third frame of a published message).
std::string encode_event_batch(const EventBatch& batch, const WireOptions& options);

}  // namespace rs::kv_events
