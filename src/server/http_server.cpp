#include "server/http_server.h"

#include <httplib.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "base/error.h"
#include "base/log.h"
#include "server/tokenize_routes.h"
#include "server/web_page.h"

namespace rs::server {
namespace {

using nlohmann::json;

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

void send_error(httplib::Response& res, const ApiError& error) {
  if (error.status == 503) res.set_header("Retry-After", "1");
  send_json(res, error.status, error_json(error));
}

constexpr int kListenBacklog = 4096;

// Constant-time comparison, so response timing does not reveal how much of a guessed key was right.
bool equal_secret(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace

HttpServer::HttpServer(ServerConfig config) : config_(std::move(config)), http_(std::make_unique<httplib::Server>()) {}

HttpServer::~HttpServer() { stop(); }

bool HttpServer::authorized(const std::string& authorization) const {
  return config_.api_key.empty() || equal_secret(authorization, "Bearer " + config_.api_key);
}

void HttpServer::set_ready(const ServingModel& model, sched::Scheduler& scheduler, int32_t page_size) {
  model_ = &model;
  scheduler_ = &scheduler;
  page_size_ = page_size;
  handler_ = std::make_unique<GenerateHandler>(model, scheduler, metrics_, config_.log_requests);
  ready_ = true;
}

void HttpServer::start() {
  const int threads = config_.num_threads;
  // httplib owns the queue it gets from this factory (its API takes a raw pointer).
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http_->set_payload_max_length(config_.max_request_bytes);
  http_->set_keep_alive_max_count(1000);
  http_->set_read_timeout(config_.read_timeout_s, 0);
  http_->set_write_timeout(config_.write_timeout_s, 0);
  // Streamed tokens are small writes: without TCP_NODELAY, Nagle holds each one until the previous is acknowledged,
  // and a client's delayed ACK then batches whole answers into one segment (bench serve saw 0 ms inter-token gaps).
  http_->set_tcp_nodelay(true);
  add_routes();
  bound_port_ = bind(*http_, config_.port);
  if (config_.metrics_port >= 0) {  // bound before any listener runs: a failure leaves nothing to stop
    metrics_http_ = std::make_unique<httplib::Server>();
    metrics_http_->new_task_queue = [] { return new httplib::ThreadPool(2); };
    metrics_http_->set_read_timeout(config_.read_timeout_s, 0);
    metrics_http_->set_write_timeout(config_.write_timeout_s, 0);
    add_observability_routes(*metrics_http_, /*with_metrics=*/true);
    metrics_bound_port_ = bind(*metrics_http_, config_.metrics_port);
  }
  listener_ = std::thread([this] { http_->listen_after_bind(); });
  if (metrics_http_) metrics_listener_ = std::thread([this] { metrics_http_->listen_after_bind(); });
  // httplib's stop() does nothing before its accept loop runs: wait for it, so that a stop right after start (a
  // signal during start-up) cannot leave the loop running and stop() joining it forever.
  for (int waited_ms = 0; !http_->is_running() && waited_ms < 5000; ++waited_ms)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  for (int waited_ms = 0; metrics_http_ && !metrics_http_->is_running() && waited_ms < 5000; ++waited_ms)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  RS_LOG_INFO("listening on http://{}:{}", config_.host, bound_port_);
  if (metrics_http_) RS_LOG_INFO("/metrics and /health on http://{}:{}", config_.host, metrics_bound_port_);
}

int HttpServer::bind(httplib::Server& server, int port) const {
  // httplib's default sets SO_REUSEPORT, which lets a second server bind the same port and silently take half its
  // connections. SO_REUSEADDR alone still allows a restart while old connections sit in TIME_WAIT.
  socket_t listening = -1;
  server.set_socket_options([&listening](socket_t sock) {
    int yes = 1;
    (void)setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    listening = sock;
  });
  const int bound =
      port == 0 ? server.bind_to_any_port(config_.host) : (server.bind_to_port(config_.host, port) ? port : -1);
  RS_CHECK(bound > 0, "cannot listen on {}:{} (address in use or not available)", config_.host, port);
  // Debian's cpp-httplib is a compiled library that listens with a backlog of 5: a burst of a thousand clients then
  // overflows the accept queue, and dropped handshakes surface as connections closed unanswered and as seconds-long
  // waits for /health (tools/soak_test.py). listen() again on the bound socket raises the backlog (the kernel caps it
  // at net.core.somaxconn).
  if (listening >= 0) (void)::listen(listening, kListenBacklog);
  return bound;
}

void HttpServer::stop() {
  if (metrics_listener_.joinable()) {
    metrics_http_->stop();
    metrics_listener_.join();
  }
  if (!listener_.joinable()) return;
  http_->stop();
  listener_.join();
}

void HttpServer::allow_origin(const httplib::Request& req, httplib::Response& res) const {
  const std::string origin = req.get_header_value("Origin");
  if (origin.empty() || config_.allowed_origins.empty()) return;
  const auto& allowed = config_.allowed_origins;
  const bool any = std::find(allowed.begin(), allowed.end(), "*") != allowed.end();
  if (!any && std::find(allowed.begin(), allowed.end(), origin) == allowed.end()) return;
  res.set_header("Access-Control-Allow-Origin", any ? "*" : origin);
  if (!any) res.set_header("Vary", "Origin");
}

// Known routes and their methods: a known path asked with another method gets 405 with Allow, not 404.
static const char* allowed_methods(const std::string& path, bool web_ui, bool metrics) {
  if ((web_ui && path == "/") || path == "/health" || (metrics && path == "/metrics") || path == "/version" ||
      path == "/v1/models" || path.rfind("/v1/models/", 0) == 0)
    return "GET";
  if (path == "/v1/chat/completions" || path == "/v1/completions" || path == "/tokenize" || path == "/detokenize" ||
      path == "/flush_cache")
    return "POST";
  return nullptr;
}

bool HttpServer::refuse_without_key(const httplib::Request& req, httplib::Response& res) {
  if (authorized(req.get_header_value("Authorization"))) return false;
  metrics_.count_client_error(401);
  send_error(res,
             api_error(401, "invalid_request_error",
                       "Incorrect API key provided. Send it as 'Authorization: Bearer <key>'.", {}, "invalid_api_key"));
  return true;
}

void HttpServer::add_observability_routes(httplib::Server& server, bool with_metrics) {
  if (&server != http_.get() && config_.protect_metrics) {  // the main server checks keys in its pre-routing handler
    server.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      return refuse_without_key(req, res) ? httplib::Server::HandlerResponse::Handled
                                          : httplib::Server::HandlerResponse::Unhandled;
    });
  }
  server.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    if (draining_) return send_json(res, 503, {{"status", "draining"}});
    if (!ready_) return send_json(res, 503, {{"status", "loading"}});
    send_json(res, 200, {{"status", "ok"}});
  });
  if (!with_metrics) return;
  server.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    const sched::SchedulerStats stats = ready_ ? scheduler_->stats() : sched::SchedulerStats{};
    res.set_content(metrics_.render(stats, page_size_, ready_ ? model_->name : std::string()),
                    "text/plain; version=0.0.4");
  });
}

void HttpServer::add_routes() {
  http_->set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    allow_origin(req, res);
    if (req.method == "OPTIONS") {  // CORS preflight: no credentials are sent with it
      const char* methods = allowed_methods(req.path, config_.web_ui, config_.metrics_port < 0);
      res.status = methods ? 204 : 404;
      if (methods) res.set_header("Allow", std::string(methods) + ", OPTIONS");
      if (methods && res.has_header("Access-Control-Allow-Origin")) {
        res.set_header("Access-Control-Allow-Methods", std::string(methods) + ", OPTIONS");
        res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type");
        res.set_header("Access-Control-Max-Age", "600");
      }
      return httplib::Server::HandlerResponse::Handled;
    }
    const bool protected_path = req.path.rfind("/v1/", 0) == 0 || req.path == "/flush_cache" ||
                                req.path == "/tokenize" || req.path == "/detokenize" ||
                                (config_.protect_metrics && (req.path == "/metrics" || req.path == "/health"));
    return protected_path && refuse_without_key(req, res) ? httplib::Server::HandlerResponse::Handled
                                                          : httplib::Server::HandlerResponse::Unhandled;
  });
  http_->set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    const int status = res.status;
    std::string message = "HTTP error " + std::to_string(status);
    if (status == 404) message = "Unknown route: " + req.method + " " + req.path;
    if (status >= 400 && status < 500)
      metrics_.count_client_error(
          status == 404 && allowed_methods(req.path, config_.web_ui, config_.metrics_port < 0) ? 405 : status);
    if (const char* methods =
            status == 404 ? allowed_methods(req.path, config_.web_ui, config_.metrics_port < 0) : nullptr) {
      res.status = 405;
      res.set_header("Allow", methods);
      return send_error(
          res, api_error(405, "invalid_request_error",
                         fmt::format("Method {} is not allowed on {}; use {}.", req.method, req.path, methods)));
    }
    if (status == 413)
      message = fmt::format("The request body is larger than this server's limit of {} bytes (--max-request-bytes).",
                            config_.max_request_bytes);
    if (status == 414) message = "The request URI is too long.";
    if (status == 431) message = "The request's headers are too large.";
    send_error(res, api_error(status, status >= 500 ? "server_error" : "invalid_request_error", message));
  });
  http_->set_exception_handler([this](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown error";
    try {
      std::rethrow_exception(ep);
    } catch (const rs::Error& e) {
      what = e.what();
      RS_LOG_DEBUG("{} {}: error raised at {}", req.method, req.path, e.location());
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    RS_LOG_ERROR("{} {} failed: {}", req.method, req.path, what);
    metrics_.requests_server_error++;
    send_error(res, server_error(500, "Internal error: " + what));
  });

  add_observability_routes(*http_, /*with_metrics=*/config_.metrics_port < 0);
  if (config_.web_ui)  // public: the page holds no secrets, and its API calls carry the key the user enters
    http_->Get("/", [](const httplib::Request&, httplib::Response& res) {
      // The page loads nothing from elsewhere and talks only to this server.
      res.set_header("Content-Security-Policy",
                     "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; "
                     "base-uri 'none'; form-action 'none'; frame-ancestors 'none'");
      res.set_header("Cache-Control", "no-cache");
      const std::string_view page = chat_page_html();
      res.set_content(page.data(), page.size(), "text/html; charset=utf-8");
    });
  http_->Get("/version", [this](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200, {{"version", config_.version}});
  });
  auto model_card = [this](const std::string& id) {
    return json{{"id", id},
                {"object", "model"},
                {"created", 0},
                {"owned_by", "radixserve"},
                {"root", model_->name},
                {"max_model_len", model_->max_context}};
  };
  auto loading = [](httplib::Response& res) {
    send_error(res, server_error(503, "The model is still loading.", "model_loading"));
  };
  http_->Get("/v1/models", [this, model_card, loading](const httplib::Request&, httplib::Response& res) {
    if (!ready_) return loading(res);
    json data = json::array({model_card(model_->name)});
    for (const std::string& alias : model_->aliases) data.push_back(model_card(alias));
    send_json(res, 200, {{"object", "list"}, {"data", data}});
  });
  http_->Get(R"(/v1/models/(.+))", [this, model_card, loading](const httplib::Request& req, httplib::Response& res) {
    if (!ready_) return loading(res);
    if (!model_->serves(std::string(req.matches[1])))
      return send_error(res, api_error(404, "invalid_request_error",
                                       "The model `" + std::string(req.matches[1]) + "` does not exist.", "model",
                                       "model_not_found"));
    send_json(res, 200, model_card(req.matches[1]));
  });

  auto generate = [this, loading](Endpoint endpoint) {
    return [this, endpoint, loading](const httplib::Request& req, httplib::Response& res) {
      if (!ready_) return loading(res);
      if (draining_) {
        metrics_.requests_rejected++;
        return send_error(res, server_error(503, "The server is shutting down.", "shutting_down"));
      }
      handler_->handle(endpoint, req, res);
    };
  };
  http_->Post("/v1/chat/completions", generate(Endpoint::kChat));
  http_->Post("/v1/completions", generate(Endpoint::kCompletion));
  auto text_route = [this, loading](auto function) {
    return [this, loading, function](const httplib::Request& req, httplib::Response& res) {
      if (!ready_) return loading(res);
      auto result = function(*model_, req.body);
      if (auto* error = std::get_if<ApiError>(&result)) return send_error(res, *error);
      send_json(res, 200, std::get<json>(result));
    };
  };
  http_->Post("/tokenize", text_route(tokenize_request));
  http_->Post("/detokenize", text_route(detokenize_request));
  // Extension (as in SGLang): drop every cached prefix no request uses, e.g. to measure the idle KV level.
  http_->Post("/flush_cache", [this, loading](const httplib::Request&, httplib::Response& res) {
    if (!ready_) return loading(res);
    scheduler_->flush_cache();
    send_json(res, 200, {{"status", "ok"}});
  });
}

}  // namespace rs::server
