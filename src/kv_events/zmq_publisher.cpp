#include "kv_events/zmq_publisher.h"

#include <zmq.hpp>

#include <array>
#include <chrono>

#include "base/error.h"
#include "base/log.h"

namespace rs::kv_events {
namespace {

std::array<uint8_t, 8> big_endian(uint64_t value) {
  std::array<uint8_t, 8> bytes{};
  for (int i = 7; i >= 0; --i, value >>= 8) bytes[i] = static_cast<uint8_t>(value & 0xff);
  return bytes;
}

// vLLM's rule: bind a wildcard or local-transport address, connect to any other.
bool binds(const std::string& endpoint) {
  return endpoint.find('*') != std::string::npos || endpoint.find("::") != std::string::npos ||
         endpoint.rfind("ipc://", 0) == 0 || endpoint.rfind("inproc://", 0) == 0;
}

std::string last_endpoint(zmq::socket_t& socket, const std::string& fallback) {
  try {
    const std::string resolved = socket.get(zmq::sockopt::last_endpoint);
    return resolved.empty() ? fallback : resolved;
  } catch (const zmq::error_t&) {
    return fallback;
  }
}

}  // namespace

ZmqPublisher::ZmqPublisher(const KvEventsConfig& config, WireOptions wire)
    : config_(config), wire_(std::move(wire)), context_(std::make_unique<zmq::context_t>(1)) {
  try {
    pub_ = std::make_unique<zmq::socket_t>(*context_, zmq::socket_type::pub);
    pub_->set(zmq::sockopt::sndhwm, static_cast<int>(config_.hwm));
    pub_->set(zmq::sockopt::linger, 0);
    if (binds(config_.endpoint))
      pub_->bind(config_.endpoint);
    else
      pub_->connect(config_.endpoint);
    endpoint_ = last_endpoint(*pub_, config_.endpoint);
    if (config_.replay_endpoint) {
      replay_ = std::make_unique<zmq::socket_t>(*context_, zmq::socket_type::router);
      replay_->set(zmq::sockopt::linger, 0);
      replay_->bind(*config_.replay_endpoint);
      replay_endpoint_ = last_endpoint(*replay_, *config_.replay_endpoint);
    }
  } catch (const zmq::error_t& e) {
    RS_FAIL("KV events: cannot open {} ({}): {}", config_.endpoint,
            config_.replay_endpoint ? "replay " + *config_.replay_endpoint : std::string("no replay"), e.what());
  }
  thread_ = std::thread([this] { run(); });
}

ZmqPublisher::~ZmqPublisher() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
  replay_.reset();
  pub_.reset();
  context_.reset();
}

bool ZmqPublisher::publish(EventBatch batch) {
  {
    std::lock_guard lock(mutex_);
    if (static_cast<int64_t>(queue_.size()) >= config_.max_queue_size) {
      if (dropped_.fetch_add(1) == 0)
        RS_LOG_WARN(
            "KV events: the publisher's queue is full ({} batches); dropping batches (counted in "
            "radixserve_kv_events_dropped_total)",
            config_.max_queue_size);
      return false;
    }
    queue_.push_back(std::move(batch));
  }
  wake_.notify_one();
  return true;
}

void ZmqPublisher::run() {
  const auto stop_deadline_after = std::chrono::seconds(1);
  std::optional<std::chrono::steady_clock::time_point> stop_deadline;
  for (;;) {
    std::optional<EventBatch> batch;
    {
      std::unique_lock lock(mutex_);
      // With a replay socket, wake often enough to answer replay requests promptly.
      wake_.wait_for(lock, std::chrono::milliseconds(replay_ ? 5 : 200), [&] { return stopping_ || !queue_.empty(); });
      if (stopping_ && !stop_deadline) stop_deadline = std::chrono::steady_clock::now() + stop_deadline_after;
      if (!queue_.empty() && (!stop_deadline || std::chrono::steady_clock::now() < *stop_deadline)) {
        batch = std::move(queue_.front());
        queue_.pop_front();
      } else if (stopping_) {
        break;
      }
    }
    try {
      // Let libzmq process the socket's pending commands (new connections, their subscriptions) while idle, so that
      // a subscriber that connected since the last batch already receives the next one.
      (void)pub_->get(zmq::sockopt::events);
      if (batch) send(*batch);
      if (replay_) serve_replays();
    } catch (const std::exception& e) {
      RS_LOG_ERROR("KV events: {}", e.what());
    }
  }
}

void ZmqPublisher::send(const EventBatch& batch) {
  std::string payload = encode_event_batch(batch, wire_);
  const uint64_t sequence = next_sequence_++;
  const auto sequence_bytes = big_endian(sequence);
  pub_->send(zmq::buffer(config_.topic), zmq::send_flags::sndmore);
  pub_->send(zmq::buffer(sequence_bytes), zmq::send_flags::sndmore);
  pub_->send(zmq::buffer(payload), zmq::send_flags::none);  // PUB never blocks: past the HWM zmq drops
  published_.fetch_add(1);
  sent_.emplace_back(sequence, std::move(payload));
  while (static_cast<int64_t>(sent_.size()) > config_.buffer_steps) sent_.pop_front();
}

void ZmqPublisher::serve_replays() {
  for (;;) {
    std::vector<zmq::message_t> frames;
    for (;;) {
      zmq::message_t frame;
      if (!replay_->recv(frame, zmq::recv_flags::dontwait)) break;
      const bool more = frame.more();
      frames.push_back(std::move(frame));
      if (!more) break;
    }
    if (frames.empty()) return;
    if (frames.size() != 3 || frames[2].size() != 8) {
      RS_LOG_WARN("KV events: ignoring a replay request of {} frames (expected [identity, '', 8-byte sequence])",
                  frames.size());
      continue;
    }
    uint64_t start = 0;
    for (size_t i = 0; i < 8; ++i) start = (start << 8) | frames[2].data<uint8_t>()[i];
    const std::string identity(frames[0].data<char>(), frames[0].size());
    auto reply = [&](const void* sequence, const std::string& payload) {
      replay_->send(zmq::buffer(identity), zmq::send_flags::sndmore);
      replay_->send(zmq::const_buffer("", 0), zmq::send_flags::sndmore);
      replay_->send(zmq::const_buffer(sequence, 8), zmq::send_flags::sndmore);
      replay_->send(zmq::buffer(payload), zmq::send_flags::none);
    };
    for (const auto& [sequence, payload] : sent_) {
      if (sequence < start) continue;
      const auto bytes = big_endian(sequence);
      reply(bytes.data(), payload);
    }
    const auto end = big_endian(~uint64_t{0});  // -1 as a signed 8-byte integer: the end of the replay
    reply(end.data(), std::string());
  }
}

}  // namespace rs::kv_events
