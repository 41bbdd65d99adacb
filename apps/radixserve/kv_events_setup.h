// `serve --kv-events-config JSON` (vLLM's flag and JSON): the ZeroMQ publisher and the radix cache's event sink
// (src/kv_events/), set up before the model loads so that a bad address fails in seconds.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "memory/cache_events.h"
#include "server/metrics.h"

namespace rs::app {

struct KvEventsOptions {
  std::string config_json;                     // --kv-events-config; empty = no events
  std::string hash_algorithm = "sha256_cbor";  // --prefix-caching-hash-algo (vLLM's): the only one matched
};

class KvEventsSetup {
 public:
  virtual ~KvEventsSetup() = default;
  virtual memory::CacheEventSink* sink() = 0;  // for SchedulerConfig::kv_events
  virtual server::KvEventCounts counts() const = 0;
};

// Null when the config does not enable a publisher. Refuses (rs::Error) a config it cannot honour: an unknown key, a
// publisher other than zmq, no prefix cache (nothing would ever be stored), a hash algorithm other than
// sha256_cbor, a binary built without ZeroMQ. `backend` ("cpu", "cuda[:N]") picks the events' medium.
std::unique_ptr<KvEventsSetup> start_kv_events(const KvEventsOptions& options, bool prefix_cache,
                                               const std::string& backend);

void add_kv_events_options(CLI::App& command, KvEventsOptions& options);

}  // namespace rs::app
