// BlockHasher: vLLM's `sha256_cbor` prefix-block hashing, so that an external indexer hashing the same token ids the
// way vLLM does (vllm/v1/core/kv_cache_utils.py: hash_block_tokens) names our pages as we do. A page's hash is
// SHA-256 over the canonical CBOR of the tuple (parent hash, token ids, extra keys = None); the first page's parent
// is NONE_HASH = sha256_cbor(PYTHONHASHSEED as a string), or 32 random bytes when no seed is set (as vLLM does: set
// the same PYTHONHASHSEED on the router and the servers).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "memory/cache_events.h"

namespace rs::kv_events {

// SHA-256 of the canonical CBOR encoding of the text string `text` (vLLM's sha256_cbor of a str).
memory::BlockHash sha256_cbor_text(std::string_view text);

class BlockHasher {
 public:
  // seed: PYTHONHASHSEED's value; nullopt draws a random root (hashes then match no other process).
  explicit BlockHasher(const std::optional<std::string>& seed);

  // hash_block_tokens(sha256_cbor, parent or NONE_HASH, tokens, None).
  memory::BlockHash hash(const memory::BlockHash* parent, std::span<const int32_t> tokens) const;
  const memory::BlockHash& none_hash() const { return none_hash_; }
  bool seeded() const { return seeded_; }

 private:
  memory::BlockHash none_hash_{};
  bool seeded_ = false;
};

// vLLM's ExternalBlockHash with VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=1 (its default): the digest's low 64 bits, read
// big-endian.
uint64_t external_hash(const memory::BlockHash& hash);

}  // namespace rs::kv_events
