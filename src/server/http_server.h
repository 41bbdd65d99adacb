// HttpServer: the OpenAI-compatible HTTP front end (cpp-httplib worker threads). Serves /health, /metrics and the chat
// page (GET /) from the start, generation routes once the model is ready, checks Bearer auth, and drains on shutdown.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "sched/scheduler.h"
#include "server/generate_handler.h"
#include "server/generation.h"
#include "server/metrics.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace rs::server {

struct ServerConfig {
  std::string host = "127.0.0.1";
  int port = 8000;                       // 0 = any free port (see HttpServer::port)
  std::string api_key;                   // empty = no authentication
  int32_t num_threads = 64;              // HTTP worker threads (each open stream holds one)
  size_t max_request_bytes = 64u << 20;  // larger bodies get a 413
  int read_timeout_s = 30;               // a client silent this long mid-request is dropped
  int write_timeout_s = 30;              // a client not reading for this long is dropped
  // Browser origins allowed to call the API (CORS); empty = none (no CORS headers), "*" = any.
  std::vector<std::string> allowed_origins;
  std::string version;        // reported by GET /version
  bool web_ui = true;         // serve the chat page at GET / (--no-web-ui turns it off)
  bool log_requests = false;  // also log each accepted call's prompt or messages, truncated (--log-requests)
  // Observability: /metrics on its own port of the same host (-1 = on the main port; 0 = any free port), /health on
  // both; and/or /metrics and /health behind the API key (protect_metrics, with api_key set).
  int metrics_port = -1;
  bool protect_metrics = false;
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
  // Stops listening and joins the server threads. Idempotent.
  void stop();

 private:
  void add_routes();
  // The observability routes (/health, and /metrics unless it has its own port) on `server`, key-checked when asked.
  void add_observability_routes(httplib::Server& server, bool with_metrics);
  // Binds `server` to host:port (0 = any free port), returns the bound port; throws rs::Error when it cannot.
  int bind(httplib::Server& server, int port) const;
  void add_model_routes();
  // Sets the CORS headers for the request's Origin when it is allowed.
  void allow_origin(const httplib::Request& req, httplib::Response& res) const;
  bool authorized(const std::string& authorization) const;
  // Answers 401 and returns true when the request lacks the API key (false: carry on).
  bool refuse_without_key(const httplib::Request& req, httplib::Response& res);

  ServerConfig config_;
  std::unique_ptr<httplib::Server> http_;
  std::thread listener_;
  std::unique_ptr<httplib::Server> metrics_http_;  // with ServerConfig::metrics_port >= 0
  std::thread metrics_listener_;
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
