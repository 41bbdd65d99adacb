// KvEventsConfig: vLLM's --kv-events-config (vllm/config/kv_events.py), the same JSON keys and defaults, so that a
// deployment written for vLLM configures radixserve's publisher unchanged.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace rs::kv_events {

struct KvEventsConfig {
  bool enable_kv_cache_events = false;
  std::string publisher = "null";  // "zmq" or "null" (none); vLLM picks zmq when events are enabled and none is named
  std::string endpoint =
      "tcp://*:5557";  // PUB socket: bound when it holds '*', '::', ipc:// or inproc://, else connected
  std::optional<std::string> replay_endpoint;  // ROUTER socket (always bound) answering replay requests
  int64_t buffer_steps = 10000;                // batches kept for replay
  int64_t hwm = 100000;                        // ZeroMQ send high-water mark of the PUB socket
  int64_t max_queue_size = 100000;             // batches waiting for the publisher thread; more are dropped
  std::string topic;                           // first frame of every message

  bool publishes() const { return enable_kv_cache_events && publisher == "zmq"; }
};

// Parses the JSON text of --kv-events-config. Unknown keys, wrong types and impossible values are errors (RS_CHECK)
// that name the key.
KvEventsConfig parse_kv_events_config(const std::string& json_text);

}  // namespace rs::kv_events
