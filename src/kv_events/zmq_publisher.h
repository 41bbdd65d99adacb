// ZmqPublisher: sends KV event batches as vLLM's ZmqEventPublisher does, over libzmq (cppzmq): a PUB socket sends
// [topic, sequence number (8 bytes, big-endian), msgpack EventBatch]; a ROUTER socket answers a subscriber that
// missed sequence numbers — a request [identity, "", start sequence (8 bytes)] gets every buffered batch from there as
// [identity, "", sequence, payload], then [identity, "", -1 (8 bytes), ""]. Encoding and sending run on the
// publisher's own thread behind a bounded queue, so publish() never blocks the scheduler; a batch that finds the
// queue full is dropped and counted.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "kv_events/event_batch.h"
#include "kv_events/kv_events_config.h"

namespace zmq {
class context_t;
class socket_t;
}  // namespace zmq

namespace rs::kv_events {

class ZmqPublisher {
 public:
  // Binds or connects the sockets now (an address in use fails here, with its reason) and starts the thread.
  ZmqPublisher(const KvEventsConfig& config, WireOptions wire);
  ~ZmqPublisher();  // sends what is queued (up to a second), then closes the sockets
  ZmqPublisher(const ZmqPublisher&) = delete;
  ZmqPublisher& operator=(const ZmqPublisher&) = delete;

  // Any thread; never blocks. false when the queue is full (the batch is dropped and counted).
  bool publish(EventBatch batch);

  uint64_t published() const { return published_.load(); }  // batches sent
  uint64_t dropped() const { return dropped_.load(); }      // batches dropped at a full queue
  // The addresses the sockets ended up on (a tcp port 0 or '*' resolved), for the start-up log.
  const std::string& endpoint() const { return endpoint_; }
  const std::string& replay_endpoint() const { return replay_endpoint_; }

 private:
  void run();
  void send(const EventBatch& batch);
  void serve_replays();

  KvEventsConfig config_;
  WireOptions wire_;
  std::unique_ptr<zmq::context_t> context_;
  std::unique_ptr<zmq::socket_t> pub_;
  std::unique_ptr<zmq::socket_t> replay_;  // null without a replay endpoint
  std::string endpoint_, replay_endpoint_;

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<EventBatch> queue_;  // guarded by mutex_
  bool stopping_ = false;         // guarded by mutex_
  std::atomic<uint64_t> published_{0}, dropped_{0};

  // Publisher thread only.
  uint64_t next_sequence_ = 0;
  std::deque<std::pair<uint64_t, std::string>> sent_;  // the last buffer_steps batches, for replay
  std::thread thread_;
};

}  // namespace rs::kv_events
