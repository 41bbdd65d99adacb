// HttpServer: the OpenAI-compatible HTTP front end on the event-driven rs::http server. Routes requests, serves
// /health, /metrics and the chat page (GET /) from the start and generation routes once the model is ready, checks
// Bearer auth and CORS, formats every refusal as an OpenAI error, and drains on shutdown.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sched/scheduler.h"
#include "server/generate_handler.h"
#include "server/generation.h"
#include "server/metrics.h"

#include "http/server.h"

namespace rs::server {

struct ServerConfig {
  std::string host = "127.0.0.1";
  int port = 8000;                       // 0 = any free port (see HttpServer::port)
  std::string api_key;                   // empty = no authentication
  int32_t io_threads = 0;                // connections' I/O (0 = min(cores, 4)); a waiting stream holds no thread
  int32_t worker_threads = 0;            // request parsing, templates, tokenizing (0 = max(4, cores))
  int64_t max_connections = 10000;       // open connections; past this a new one gets 503 (--max-connections)
  size_t max_request_bytes = 64u << 20;  // larger bodies get a 413
  int read_timeout_s = 30;               // a client silent this long mid-request is dropped
  int write_timeout_s = 30;              // a client not reading for this long is dropped
  int keep_alive_timeout_s = 60;         // an idle keep-alive connection is closed after this long
  // Browser origins allowed to call the API (CORS); empty = none (no CORS headers), "*" = any.
  std::vector<std::string> allowed_origins;
  std::string version;        // reported by GET /version
  bool web_ui = true;         // serve the chat page at GET / (--no-web-ui turns it off)
  bool log_requests = false;  // also log each accepted call's prompt or messages, truncated (--log-requests)
  // Observability: /metrics on its own port of the same host (-1 = on the main port; 0 = any free port), /health on
  // both; and/or /metrics and /health behind the API key (protect_metrics, with api_key set).
  int metrics_port = -1;
  bool protect_metrics = false;
  // The KV cache event publisher's counters (--kv-events-config), rendered in /metrics; unset: no publisher.
  std::function<KvEventCounts()> kv_event_counts;
};

class HttpServer {
 public:
  explicit HttpServer(ServerConfig config);
  ~HttpServer();  // stops serving
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and starts serving on background threads; /health answers 503 until set_ready. Throws rs::Error when the
  // address cannot be bound.
  void start();
  int port() const { return bound_port_; }
  int metrics_port() const { return metrics_bound_port_; }  // -1 without a metrics port
  // The model is loaded: generation routes serve from now on. model and scheduler must outlive the server.
  void set_ready(const ServingModel& model, sched::Scheduler& scheduler, int32_t page_size);
  // Refuses new generation calls (503) and reports unhealthy; calls in flight carry on.
  void begin_drain() { draining_ = true; }
  // Generation calls still producing a response.
  int32_t in_flight() const { return handler_ ? handler_->in_flight() : 0; }
  // Connections open on the API port now.
  int64_t connections() const { return http_ ? http_->connections() : 0; }
  // Closes every connection (answers still pending are abandoned) and stops listening. Idempotent.
  void stop();

 private:
  // The API port's requests: CORS, preflight and key checks, then route_model.
  http::Response route(const http::Request& req);
  http::Response route_model(const http::Request& req);
  // The metrics port's requests (/health and /metrics only), and those two routes themselves.
  http::Response route_metrics_port(const http::Request& req);
  http::Response observe(const http::Request& req);
  // A refusal by the HTTP layer (oversized body or headers, malformed request, too many connections) as an API error.
  http::Response refusal(int status, const http::Request& req);
  // Sets the CORS headers for the request's Origin when it is allowed.
  void allow_origin(const http::Request& req, http::Response& res) const;
  bool authorized(std::string_view authorization) const;
  // A 401 when the request lacks the API key; nullopt: carry on.
  std::optional<http::Response> refuse_without_key(const http::Request& req);
  http::ServerOptions options_for(int port) const;

  ServerConfig config_;
  std::unique_ptr<http::Server> http_;
  std::unique_ptr<http::Server> metrics_http_;  // with ServerConfig::metrics_port >= 0
  int metrics_bound_port_ = -1;
  int bound_port_ = 0;
  ServerMetrics metrics_;
  const ServingModel* model_ = nullptr;
  sched::Scheduler* scheduler_ = nullptr;
  int32_t page_size_ = 0;
  std::unique_ptr<GenerateHandler> handler_;
  std::atomic<bool> ready_{false};
  std::atomic<bool> draining_{false};
};

}  // namespace rs::server
