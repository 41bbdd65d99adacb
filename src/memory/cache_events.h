// CacheEventSink: what the radix cache reports as it caches, evicts and clears whole pages of tokens, for the
// publisher of KV cache events (kv_events/) that lets an external router index which prefixes this server holds.
// Each page is named by a hash chained over every token before it (the sink chooses the hash); the cache keeps the
// hashes beside its pages so that an eviction names exactly what was stored. Scheduler thread only.
#pragma once

#include <array>
#include <cstdint>
#include <span>

namespace rs::memory {

using BlockHash = std::array<uint8_t, 32>;

class CacheEventSink {
 public:
  virtual ~CacheEventSink() = default;
  // The hash of one page of tokens that follows the page hashed `parent` (null: the page starts the sequence).
  virtual BlockHash hash_block(const BlockHash* parent, std::span<const int32_t> tokens) = 0;
  // Pages newly held by the cache: hashes[i] names tokens[i * page_size, (i + 1) * page_size); `parent` is the hash
  // of the page before the first (null at the start of a sequence).
  virtual void stored(const BlockHash* parent, std::span<const BlockHash> hashes, std::span<const int32_t> tokens) = 0;
  // Pages the cache no longer holds.
  virtual void removed(std::span<const BlockHash> hashes) = 0;
  // The cache holds nothing any more (a flush that emptied it).
  virtual void cleared() = 0;
  // The scheduler finished a step: what was reported since the last call forms one batch.
  virtual void end_step() = 0;
};

}  // namespace rs::memory
