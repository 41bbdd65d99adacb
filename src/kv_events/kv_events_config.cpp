#include "kv_events/kv_events_config.h"

#include <nlohmann/json.hpp>

#include "base/error.h"

namespace rs::kv_events {

KvEventsConfig parse_kv_events_config(const std::string& json_text) {
  const nlohmann::json json = nlohmann::json::parse(json_text, nullptr, false);
  RS_CHECK(json.is_object(), "--kv-events-config must be a JSON object (vLLM's KVEventsConfig), not: {}", json_text);
  KvEventsConfig config;
  bool publisher_named = false;
  for (const auto& [key, value] : json.items()) {
    const auto string_of = [&] {
      RS_CHECK(value.is_string(), "--kv-events-config: {} must be a string", key);
      return value.get<std::string>();
    };
    const auto count_of = [&](int64_t min) {
      RS_CHECK(value.is_number_integer() && value.get<int64_t>() >= min,
               "--kv-events-config: {} must be an integer >= {}", key, min);
      return value.get<int64_t>();
    };
    if (key == "enable_kv_cache_events") {
      RS_CHECK(value.is_boolean(), "--kv-events-config: enable_kv_cache_events must be true or false");
      config.enable_kv_cache_events = value.get<bool>();
    } else if (key == "publisher") {
      publisher_named = !value.is_null();
      if (publisher_named) config.publisher = string_of();
    } else if (key == "endpoint") {
      config.endpoint = string_of();
    } else if (key == "replay_endpoint") {
      if (!value.is_null()) config.replay_endpoint = string_of();
    } else if (key == "buffer_steps") {
      config.buffer_steps = count_of(1);
    } else if (key == "hwm") {
      config.hwm = count_of(0);
    } else if (key == "max_queue_size") {
      config.max_queue_size = count_of(1);
    } else if (key == "topic") {
      config.topic = string_of();
    } else {
      RS_FAIL(
          "--kv-events-config: unknown key '{}' (known: enable_kv_cache_events, publisher, endpoint, "
          "replay_endpoint, buffer_steps, hwm, max_queue_size, topic)",
          key);
    }
  }
  if (!publisher_named && config.enable_kv_cache_events) config.publisher = "zmq";
  RS_CHECK(config.publisher == "zmq" || config.publisher == "null",
           "--kv-events-config: publisher '{}' is not supported (zmq or null)", config.publisher);
  RS_CHECK(config.endpoint.rfind("tcp://", 0) == 0 || config.endpoint.rfind("ipc://", 0) == 0 ||
               config.endpoint.rfind("inproc://", 0) == 0,
           "--kv-events-config: endpoint '{}' must be a tcp://, ipc:// or inproc:// address", config.endpoint);
  return config;
}

}  // namespace rs::kv_events
