#include "apps/radixserve/kv_events_setup.h"

#include <cstdlib>

#include "base/error.h"
#include "base/log.h"
#ifdef RS_HAVE_KV_EVENTS
#include "kv_events/kv_event_recorder.h"
#include "kv_events/kv_events_config.h"
#include "kv_events/zmq_publisher.h"
#endif

namespace rs::app {
namespace {

#ifdef RS_HAVE_KV_EVENTS
class ZmqKvEvents final : public KvEventsSetup {
 public:
  ZmqKvEvents(const kv_events::KvEventsConfig& config, kv_events::WireOptions wire,
              const std::optional<std::string>& seed)
      : publisher_(config, std::move(wire)),
        recorder_(kv_events::BlockHasher(seed),
                  [this](kv_events::EventBatch batch) { publisher_.publish(std::move(batch)); }) {}
  memory::CacheEventSink* sink() override { return &recorder_; }
  server::KvEventCounts counts() const override { return {publisher_.published(), publisher_.dropped()}; }
  const kv_events::ZmqPublisher& publisher() const { return publisher_; }

 private:
  kv_events::ZmqPublisher publisher_;
  kv_events::KvEventRecorder recorder_;
};
#endif

}  // namespace

std::unique_ptr<KvEventsSetup> start_kv_events(const KvEventsOptions& options, bool prefix_cache,
                                               const std::string& backend) {
  if (options.config_json.empty()) return nullptr;
#ifdef RS_HAVE_KV_EVENTS
  const kv_events::KvEventsConfig config = kv_events::parse_kv_events_config(options.config_json);
  if (!config.publishes()) return nullptr;
  RS_CHECK(prefix_cache,
           "--kv-events-config: KV cache events describe the prefix cache, which "
           "--disable-radix-cache turns off");
  RS_CHECK(options.hash_algorithm == "sha256_cbor",
           "--prefix-caching-hash-algo {}: KV events name blocks with sha256_cbor only (the language-neutral hash "
           "external indexers recompute; vLLM's sha256 hashes Python pickles)",
           options.hash_algorithm);
  kv_events::WireOptions wire;
  wire.medium = backend.rfind("cuda", 0) == 0 ? "GPU" : "CPU";
  const char* int_hashes = std::getenv("VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES");
  wire.int_hashes = !int_hashes || std::string(int_hashes) != "0";
  const char* seed_env = std::getenv("PYTHONHASHSEED");
  const std::optional<std::string> seed = seed_env ? std::optional<std::string>(seed_env) : std::nullopt;
  if (!seed)
    RS_LOG_WARN(
        "KV events: PYTHONHASHSEED is not set, so block hashes start from a random seed that no router "
        "can reproduce; set the same PYTHONHASHSEED here and on the indexer (as for vLLM)");
  auto setup = std::make_unique<ZmqKvEvents>(config, wire, seed);
  RS_LOG_INFO("KV events: publishing on {}{} (topic '{}', {} hashes, medium {}, buffer of {} batches)",
              setup->publisher().endpoint(),
              setup->publisher().replay_endpoint().empty() ? "" : ", replay on " + setup->publisher().replay_endpoint(),
              config.topic, wire.int_hashes ? "64-bit" : "32-byte", wire.medium, config.buffer_steps);
  return setup;
#else
  (void)prefix_cache;
  (void)backend;
  RS_FAIL("--kv-events-config: this radixserve was built without ZeroMQ/msgpack (run scripts/setup and rebuild)");
#endif
}

void add_kv_events_options(CLI::App& cmd, KvEventsOptions& options) {
  cmd.add_option("--kv-events-config", options.config_json,
                 "Publish KV cache events for prefix-aware routers, as vLLM does: its JSON, e.g. "
                 "'{\"enable_kv_cache_events\": true, \"publisher\": \"zmq\", \"endpoint\": \"tcp://*:5557\", "
                 "\"replay_endpoint\": \"tcp://*:5558\"}'. Block size = --page-size; hashes sha256_cbor seeded by "
                 "$PYTHONHASHSEED");
  cmd.add_option("--prefix-caching-hash-algo", options.hash_algorithm,
                 "Block hash of KV events (vLLM's flag): sha256_cbor")
      ->capture_default_str();
}

}  // namespace rs::app
