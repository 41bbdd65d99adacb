// KV cache events: vLLM's config keys, its sha256_cbor block hashes (vectors computed with Python's cbor2 + hashlib),
// the msgpack EventBatch layout, and the ZeroMQ publisher's messages and replay.
#include <gtest/gtest.h>

#define MSGPACK_NO_BOOST
#include <msgpack.hpp>
#include <zmq.hpp>

#include <fmt/format.h>

#include <array>
#include <thread>

#include "kv_events/block_hasher.h"
#include "kv_events/event_batch.h"
#include "kv_events/kv_event_recorder.h"
#include "kv_events/kv_events_config.h"
#include "kv_events/zmq_publisher.h"

namespace rs::kv_events {
namespace {

std::string hex(const memory::BlockHash& hash) {
  std::string out;
  for (uint8_t b : hash) out += fmt::format("{:02x}", b);
  return out;
}

TEST(KvEventsConfig, ReadsVllmsKeysAndDefaults) {
  const KvEventsConfig config = parse_kv_events_config(
      R"({"enable_kv_cache_events": true, "endpoint": "tcp://*:6001", "replay_endpoint": "tcp://*:6002",
          "topic": "kv", "buffer_steps": 5, "hwm": 10, "max_queue_size": 7})");
  EXPECT_TRUE(config.publishes());
  EXPECT_EQ(config.publisher, "zmq");  // chosen when events are on and no publisher is named
  EXPECT_EQ(config.endpoint, "tcp://*:6001");
  EXPECT_EQ(config.replay_endpoint, "tcp://*:6002");
  EXPECT_EQ(config.topic, "kv");
  EXPECT_EQ(config.buffer_steps, 5);
  EXPECT_EQ(config.hwm, 10);
  EXPECT_EQ(config.max_queue_size, 7);
  EXPECT_FALSE(parse_kv_events_config("{}").publishes());
  EXPECT_FALSE(parse_kv_events_config(R"({"enable_kv_cache_events": true, "publisher": "null"})").publishes());
}

TEST(KvEventsConfig, RefusesWhatItCannotHonour) {
  EXPECT_THROW(parse_kv_events_config("not json"), std::exception);
  EXPECT_THROW(parse_kv_events_config(R"({"enable_kv_cache_events": true, "publisher": "nats"})"), std::exception);
  EXPECT_THROW(parse_kv_events_config(R"({"enable_kv_cache_events": true, "block_size": 16})"), std::exception);
  EXPECT_THROW(parse_kv_events_config(R"({"enable_kv_cache_events": "yes"})"), std::exception);
  EXPECT_THROW(parse_kv_events_config(R"({"buffer_steps": 0})"), std::exception);
  EXPECT_THROW(parse_kv_events_config(R"({"endpoint": "http://x:1"})"), std::exception);
}

// python3 -c 'import cbor2, hashlib; none = hashlib.sha256(cbor2.dumps("0", canonical=True)).digest();
//   h = hashlib.sha256(cbor2.dumps((none, (1, 2, 3, 300, 70000, 2**31 - 1), None), canonical=True)).digest()'
TEST(BlockHasher, MatchesVllmsSha256CborChain) {
  const BlockHasher hasher(std::string("0"));
  EXPECT_TRUE(hasher.seeded());
  EXPECT_EQ(hex(hasher.none_hash()), "4e1195df020de59e0d65a33a4279f1183e7ae4e5d980e309f8b55adff2e61c3e");
  const std::vector<int32_t> tokens = {1, 2, 3, 300, 70000, 2147483647};
  const memory::BlockHash first = hasher.hash(nullptr, tokens);
  EXPECT_EQ(hex(first), "c514130bce0591789f45cf02a5c7b0488beb10f181ff162b7ea9ade1cf079e71");
  EXPECT_EQ(external_hash(first), 9127017305195650673ull);     // int.from_bytes(h, "big") & (2**64 - 1)
  EXPECT_EQ(hasher.hash(&hasher.none_hash(), tokens), first);  // null parent = NONE_HASH
  EXPECT_NE(hasher.hash(&first, tokens), first);
  EXPECT_FALSE(BlockHasher(std::nullopt).seeded());
  EXPECT_NE(BlockHasher(std::nullopt).none_hash(), BlockHasher(std::nullopt).none_hash());
}

EventBatch sample_batch() {
  const BlockHasher hasher(std::string("0"));
  const std::vector<int32_t> tokens = {5, 6, 7, 8};
  const memory::BlockHash a = hasher.hash(nullptr, {tokens.data(), 2}), b = hasher.hash(&a, {tokens.data() + 2, 2});
  EventBatch batch{1700000000.5, {}};
  batch.events.push_back(BlockStored{{a, b}, std::nullopt, tokens, 2});
  batch.events.push_back(BlockStored{{b}, a, {7, 8}, 2});
  batch.events.push_back(BlockRemoved{{a, b}});
  batch.events.push_back(AllBlocksCleared{});
  return batch;
}

TEST(EventBatch, EncodesVllmsArrayLikeLayout) {
  const EventBatch batch = sample_batch();
  const std::string payload = encode_event_batch(batch, WireOptions{"GPU", true, 0});
  const msgpack::object_handle handle = msgpack::unpack(payload.data(), payload.size());
  const msgpack::object& root = handle.get();
  ASSERT_EQ(root.type, msgpack::type::ARRAY);
  ASSERT_EQ(root.via.array.size, 3u);
  EXPECT_EQ(root.via.array.ptr[0].as<double>(), 1700000000.5);
  EXPECT_EQ(root.via.array.ptr[2].as<int>(), 0);
  const msgpack::object& events = root.via.array.ptr[1];
  ASSERT_EQ(events.via.array.size, 4u);

  const msgpack::object& stored = events.via.array.ptr[0];
  ASSERT_EQ(stored.via.array.size, 8u);
  EXPECT_EQ(stored.via.array.ptr[0].as<std::string>(), "BlockStored");
  const auto hashes = stored.via.array.ptr[1].as<std::vector<uint64_t>>();
  const auto& a = std::get<BlockStored>(batch.events[0]).block_hashes[0];
  const auto& b = std::get<BlockStored>(batch.events[0]).block_hashes[1];
  EXPECT_EQ(hashes, (std::vector<uint64_t>{external_hash(a), external_hash(b)}));
  EXPECT_TRUE(stored.via.array.ptr[2].is_nil());
  EXPECT_EQ(stored.via.array.ptr[3].as<std::vector<int>>(), (std::vector<int>{5, 6, 7, 8}));
  EXPECT_EQ(stored.via.array.ptr[4].as<int>(), 2);
  EXPECT_TRUE(stored.via.array.ptr[5].is_nil());
  EXPECT_EQ(stored.via.array.ptr[6].as<std::string>(), "GPU");
  EXPECT_TRUE(stored.via.array.ptr[7].is_nil());
  EXPECT_EQ(events.via.array.ptr[1].via.array.ptr[2].as<uint64_t>(), external_hash(a));  // parent

  const msgpack::object& removed = events.via.array.ptr[2];
  ASSERT_EQ(removed.via.array.size, 3u);
  EXPECT_EQ(removed.via.array.ptr[0].as<std::string>(), "BlockRemoved");
  EXPECT_EQ(removed.via.array.ptr[1].as<std::vector<uint64_t>>(), hashes);
  EXPECT_EQ(removed.via.array.ptr[2].as<std::string>(), "GPU");
  const msgpack::object& cleared = events.via.array.ptr[3];
  ASSERT_EQ(cleared.via.array.size, 1u);
  EXPECT_EQ(cleared.via.array.ptr[0].as<std::string>(), "AllBlocksCleared");

  // Raw 32-byte hashes (VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=0).
  const std::string raw = encode_event_batch(batch, WireOptions{"CPU", false, 0});
  const msgpack::object_handle raw_handle = msgpack::unpack(raw.data(), raw.size());
  const msgpack::object& first_hash =
      raw_handle.get().via.array.ptr[1].via.array.ptr[0].via.array.ptr[1].via.array.ptr[0];
  ASSERT_EQ(first_hash.type, msgpack::type::BIN);
  EXPECT_EQ(std::string(first_hash.via.bin.ptr, first_hash.via.bin.size),
            std::string(reinterpret_cast<const char*>(a.data()), a.size()));
}

TEST(KvEventRecorder, GathersAStepsEventsIntoOneBatch) {
  std::vector<EventBatch> published;
  KvEventRecorder recorder(BlockHasher(std::string("0")), [&](EventBatch b) { published.push_back(std::move(b)); });
  recorder.end_step();
  EXPECT_TRUE(published.empty());  // nothing happened: nothing is sent
  const std::vector<int32_t> tokens = {1, 2, 3, 4, 5, 6};
  const memory::BlockHash h0 = recorder.hash_block(nullptr, {tokens.data(), 3});
  const memory::BlockHash h1 = recorder.hash_block(&h0, {tokens.data() + 3, 3});
  const std::vector<memory::BlockHash> both = {h0, h1};
  recorder.stored(nullptr, both, tokens);
  recorder.removed({&h1, 1});
  recorder.removed({&h0, 1});  // merged with the removal before it
  recorder.end_step();
  ASSERT_EQ(published.size(), 1u);
  ASSERT_EQ(published[0].events.size(), 2u);
  const auto& stored = std::get<BlockStored>(published[0].events[0]);
  EXPECT_EQ(stored.block_size, 3);
  EXPECT_EQ(stored.block_hashes, both);
  EXPECT_EQ(std::get<BlockRemoved>(published[0].events[1]).block_hashes, (std::vector<memory::BlockHash>{h1, h0}));
  recorder.cleared();
  recorder.end_step();
  ASSERT_EQ(published.size(), 2u);
  EXPECT_TRUE(std::holds_alternative<AllBlocksCleared>(published[1].events[0]));
}

uint64_t read_be(const zmq::message_t& frame) {
  uint64_t value = 0;
  for (size_t i = 0; i < frame.size(); ++i) value = (value << 8) | frame.data<uint8_t>()[i];
  return value;
}

TEST(ZmqPublisher, SendsNumberedBatchesAndReplaysFromABuffer) {
  KvEventsConfig config = parse_kv_events_config(
      R"({"enable_kv_cache_events": true, "endpoint": "tcp://127.0.0.1:*", "replay_endpoint": "tcp://127.0.0.1:*",
          "topic": "t", "buffer_steps": 2})");
  ZmqPublisher publisher(config, WireOptions{});
  ASSERT_NE(publisher.endpoint().find("127.0.0.1:"), std::string::npos) << publisher.endpoint();

  zmq::context_t context;
  zmq::socket_t sub(context, zmq::socket_type::sub);
  sub.set(zmq::sockopt::subscribe, "");
  sub.set(zmq::sockopt::rcvtimeo, 5000);
  sub.connect(publisher.endpoint());
  // A PUB drops what it sends before the subscription arrives: publish until one comes through.
  std::vector<zmq::message_t> frames;
  uint64_t queued = 0;
  for (int attempt = 0; attempt < 100 && frames.empty(); ++attempt) {
    queued += publisher.publish(EventBatch{1.0, {AllBlocksCleared{}}}) ? 1 : 0;
    sub.set(zmq::sockopt::rcvtimeo, 50);
    zmq::message_t frame;
    while (sub.recv(frame)) {
      const bool more = frame.more();
      frames.push_back(std::move(frame));
      if (!more) break;
    }
  }
  ASSERT_EQ(frames.size(), 3u);
  EXPECT_EQ(frames[0].to_string(), "t");
  EXPECT_EQ(frames[1].size(), 8u);
  const uint64_t first_seen = read_be(frames[1]);
  const msgpack::object_handle handle = msgpack::unpack(frames[2].data<char>(), frames[2].size());
  EXPECT_EQ(handle.get().via.array.ptr[1].via.array.ptr[0].via.array.ptr[0].as<std::string>(), "AllBlocksCleared");
  // Two more batches, so that the buffer of 2 holds less than everything that was sent; then wait until the
  // publisher's thread has sent all of them (the counter moves after each send).
  EXPECT_LT(first_seen, queued);
  queued += publisher.publish(EventBatch{2.0, {}}) ? 1 : 0;
  queued += publisher.publish(EventBatch{3.0, {}}) ? 1 : 0;
  for (int i = 0; i < 500 && publisher.published() < queued; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const uint64_t sent = publisher.published();
  ASSERT_EQ(sent, queued);

  // Replay from 0 with a buffer of 2: only the last two batches come back, then the end marker (-1).
  zmq::socket_t dealer(context, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::rcvtimeo, 5000);
  dealer.connect(publisher.replay_endpoint());
  const std::array<uint8_t, 8> zero{};
  dealer.send(zmq::const_buffer("", 0), zmq::send_flags::sndmore);
  dealer.send(zmq::buffer(zero), zmq::send_flags::none);
  std::vector<uint64_t> replayed;
  for (;;) {
    std::vector<zmq::message_t> reply;
    zmq::message_t frame;
    while (dealer.recv(frame)) {
      const bool more = frame.more();
      reply.push_back(std::move(frame));
      if (!more) break;
    }
    ASSERT_EQ(reply.size(), 3u);  // "", sequence, payload
    const uint64_t sequence = read_be(reply[1]);
    if (sequence == ~uint64_t{0}) {
      EXPECT_EQ(reply[2].size(), 0u);
      break;
    }
    replayed.push_back(sequence);
  }
  EXPECT_EQ(replayed, (std::vector<uint64_t>{sent - 2, sent - 1}));
}

TEST(ZmqPublisher, AnAddressInUseFailsAtStart) {
  KvEventsConfig config =
      parse_kv_events_config(R"({"enable_kv_cache_events": true, "endpoint": "tcp://127.0.0.1:*"})");
  ZmqPublisher first(config, WireOptions{});
  config.endpoint = first.endpoint();
  config.endpoint.replace(config.endpoint.find("127.0.0.1"), 9, "*");  // bind the same port again
  EXPECT_THROW(ZmqPublisher(config, WireOptions{}), std::exception);
}

}  // namespace
}  // namespace rs::kv_events
