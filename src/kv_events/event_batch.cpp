#include "kv_events/event_batch.h"

#define MSGPACK_NO_BOOST
#include <msgpack.hpp>

#include "kv_events/block_hasher.h"

namespace rs::kv_events {
namespace {

using Packer = msgpack::packer<msgpack::sbuffer>;

void pack_hash(Packer& pk, const memory::BlockHash& hash, const WireOptions& options) {
  if (options.int_hashes) {
    pk.pack_uint64(external_hash(hash));
    return;
  }
  pk.pack_bin(static_cast<uint32_t>(hash.size()));
  pk.pack_bin_body(reinterpret_cast<const char*>(hash.data()), static_cast<uint32_t>(hash.size()));
}

void pack_hashes(Packer& pk, const std::vector<memory::BlockHash>& hashes, const WireOptions& options) {
  pk.pack_array(static_cast<uint32_t>(hashes.size()));
  for (const memory::BlockHash& hash : hashes) pack_hash(pk, hash, options);
}

void pack_event(Packer& pk, const KvEvent& event, const WireOptions& options) {
  if (const auto* stored = std::get_if<BlockStored>(&event)) {
    pk.pack_array(8);
    pk.pack(std::string_view("BlockStored"));
    pack_hashes(pk, stored->block_hashes, options);
    if (stored->parent_block_hash)
      pack_hash(pk, *stored->parent_block_hash, options);
    else
      pk.pack_nil();
    pk.pack_array(static_cast<uint32_t>(stored->token_ids.size()));
    for (int32_t token : stored->token_ids) pk.pack_int32(token);
    pk.pack_int32(stored->block_size);
    pk.pack_nil();  // lora_id: no adapters
    pk.pack(std::string_view(options.medium));
    pk.pack_nil();  // lora_name
  } else if (const auto* removed = std::get_if<BlockRemoved>(&event)) {
    pk.pack_array(3);
    pk.pack(std::string_view("BlockRemoved"));
    pack_hashes(pk, removed->block_hashes, options);
    pk.pack(std::string_view(options.medium));
  } else {
    pk.pack_array(1);
    pk.pack(std::string_view("AllBlocksCleared"));
  }
}

}  // namespace

std::string encode_event_batch(const EventBatch& batch, const WireOptions& options) {
  msgpack::sbuffer buffer;
  Packer pk(buffer);
  pk.pack_array(3);
  pk.pack_double(batch.ts);
  pk.pack_array(static_cast<uint32_t>(batch.events.size()));
  for (const KvEvent& event : batch.events) pack_event(pk, event, options);
  pk.pack_int32(options.data_parallel_rank);
  return std::string(buffer.data(), buffer.size());
}

}  // namespace rs::kv_events
