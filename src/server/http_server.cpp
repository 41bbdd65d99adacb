#include "server/http_server.h"

#include <algorithm>
#include <cctype>

#include "base/error.h"
#include "base/log.h"
#include "server/gateway_routes.h"
#include "server/tokenize_routes.h"
#include "server/web_page.h"

namespace rs::server {
namespace {

using nlohmann::json;

void send_json(http::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

void send_error(http::Response& res, const ApiError& error) {
  if (error.status == 503) res.set_header("Retry-After", "1");
  send_json(res, error.status, error_json(error));
}

// Constant-time comparison, so response timing does not reveal how much of a guessed key was right.
bool equal_secret(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

// Known routes and their methods: a known path asked with another method gets 405 with Allow, not 404.
const char* allowed_methods(const std::string& path, bool web_ui, bool metrics) {
  if ((web_ui && path == "/") || path == "/health" || (metrics && path == "/metrics") || path == "/version" ||
      path == "/v1/models" || path.rfind("/v1/models/", 0) == 0 || path == "/live" || path == "/health_generate" ||
      path == "/get_model_info" || path == "/get_server_info" || path == "/server_info" || path == "/get_load")
    return "GET";
  if (path == "/v1/chat/completions" || path == "/v1/completions" || path == "/v1/messages" ||
      path == "/v1/embeddings" || path == "/v1/messages/count_tokens" || path == "/v1/responses" ||
      path == "/tokenize" || path == "/detokenize")
    return "POST";
  if (path.rfind("/v1/responses/", 0) == 0) return "GET, DELETE";
  if (path == "/flush_cache") return "GET, POST";  // SGLang's gateway sends either
  return nullptr;
}

bool is_observability(const std::string& path) { return path == "/health" || path == "/metrics"; }

// A client's X-Request-Id comes back on the answer (tracing across a gateway) when it is a plain token of at most 256
// characters; anything else is dropped rather than echoed into a header.
void echo_request_id(const http::Request& req, http::Response& res) {
  const std::string_view id = req.header("X-Request-Id");
  if (id.empty() || id.size() > 256) return;
  for (const char c : id)
    if (c < 0x21 || c > 0x7e) return;
  res.set_header("X-Request-Id", std::string(id));
}

// What a preflight allows: our own request headers plus whatever the browser says the request will carry (SDKs add
// their own, e.g. the OpenAI SDK's x-stainless-*), when that list holds only header-name characters (at most 2 KiB).
std::string preflight_allowed_headers(const http::Request& req) {
  std::string allowed = "Authorization, Content-Type";
  const std::string_view asked = req.header("Access-Control-Request-Headers");
  if (asked.empty() || asked.size() > 2048) return allowed;
  for (const char c : asked)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != ',' && c != ' ') return allowed;
  return allowed + ", " + std::string(asked);
}

}  // namespace

HttpServer::HttpServer(ServerConfig config) : config_(std::move(config)) {}

HttpServer::~HttpServer() { stop(); }

bool HttpServer::authorized(std::string_view authorization) const {
  return config_.api_key.empty() || equal_secret(authorization, "Bearer " + config_.api_key);
}

void HttpServer::set_ready(const ServingModel& model, sched::Scheduler& scheduler, int32_t page_size) {
  model_ = &model;
  scheduler_ = &scheduler;
  page_size_ = page_size;
  handler_ = std::make_unique<GenerateHandler>(model, scheduler, metrics_, config_.log_requests);
  ready_ = true;
}

http::ServerOptions HttpServer::options_for(int port) const {
  return http::ServerOptions{.host = config_.host,
                             .port = port,
                             .io_threads = config_.io_threads,
                             .worker_threads = config_.worker_threads,
                             .max_body_bytes = config_.max_request_bytes,
                             .read_timeout_s = config_.read_timeout_s,
                             .write_timeout_s = config_.write_timeout_s,
                             .keep_alive_timeout_s = config_.keep_alive_timeout_s,
                             .max_connections = config_.max_connections};
}

void HttpServer::start() {
  http::raise_open_file_limit();  // thousands of open streams need thousands of descriptors
  auto refusal = [this](int status, const http::Request& req) { return this->refusal(status, req); };
  // Cheap requests are answered on the I/O thread, so /health stays fast while every worker tokenizes.
  auto cheap = [](const http::Request& req) { return req.method != "POST"; };
  http_ = std::make_unique<http::Server>(
      options_for(config_.port),
      http::Routes{
          .handle = [this](const http::Request& req) { return route(req); }, .is_cheap = cheap, .refusal = refusal});
  if (config_.metrics_port >= 0) {
    http::ServerOptions options = options_for(config_.metrics_port);
    options.io_threads = 1;
    options.worker_threads = 1;
    metrics_http_ = std::make_unique<http::Server>(
        options, http::Routes{.handle = [this](const http::Request& req) { return route_metrics_port(req); },
                              .is_cheap = [](const http::Request&) { return true; },
                              .refusal = refusal});
  }
  http_->start();
  try {
    if (metrics_http_) metrics_http_->start();
  } catch (...) {
    http_->stop();
    throw;
  }
  bound_port_ = http_->port();
  if (metrics_http_) metrics_bound_port_ = metrics_http_->port();
  // An IPv6 address goes in brackets in a URL ([::]:8000), as clients must write it.
  const std::string host = config_.host.find(':') != std::string::npos ? "[" + config_.host + "]" : config_.host;
  RS_LOG_INFO("listening on http://{}:{}", host, bound_port_);
  if (metrics_http_) RS_LOG_INFO("/metrics and /health on http://{}:{}", host, metrics_bound_port_);
}

void HttpServer::stop() {
  if (metrics_http_) metrics_http_->stop();
  if (http_) http_->stop();
}

void HttpServer::allow_origin(const http::Request& req, http::Response& res) const {
  const std::string origin(req.header("Origin"));
  if (origin.empty() || config_.allowed_origins.empty()) return;
  const auto& allowed = config_.allowed_origins;
  const bool any = std::find(allowed.begin(), allowed.end(), "*") != allowed.end();
  if (!any && std::find(allowed.begin(), allowed.end(), origin) == allowed.end()) return;
  res.set_header("Access-Control-Allow-Origin", any ? "*" : origin);
  // Response headers a browser client may read besides the CORS-safelisted ones.
  res.set_header("Access-Control-Expose-Headers", "Retry-After, Allow, X-Request-Id");
  if (!any) res.set_header("Vary", "Origin");
}

std::optional<http::Response> HttpServer::refuse_without_key(const http::Request& req) {
  // Anthropic's clients send the key as x-api-key.
  if (authorized(req.header("Authorization")) ||
      (!config_.api_key.empty() && equal_secret(req.header("x-api-key"), config_.api_key)))
    return std::nullopt;
  metrics_.count_client_error(401);
  http::Response res;
  send_error(res,
             api_error(401, "invalid_request_error",
                       "Incorrect API key provided. Send it as 'Authorization: Bearer <key>'.", {}, "invalid_api_key"));
  return res;
}

http::Response HttpServer::refusal(int status, const http::Request& req) {
  http::Response res;
  std::string message = "HTTP error " + std::to_string(status);
  if (status == 400) message = "The request is not valid HTTP.";
  if (status == 413)
    message = fmt::format("The request body is larger than this server's limit of {} bytes (--max-request-bytes).",
                          config_.max_request_bytes);
  if (status == 414) message = "The request URI is too long.";
  if (status == 431) message = "The request's headers are too large.";
  if (status == 503) {
    metrics_.requests_rejected++;
    send_error(res, server_error(503,
                                 fmt::format("Too many open connections (--max-connections {}). Retry later.",
                                             config_.max_connections),
                                 "server_overloaded"));
    return res;
  }
  if (status >= 500) {
    metrics_.requests_server_error++;
    RS_LOG_ERROR("{} {}: internal error", req.method, req.path);
    send_error(res, server_error(status, "Internal error while handling the request."));
    return res;
  }
  metrics_.count_client_error(status);
  send_error(res, api_error(status, "invalid_request_error", message));
  return res;
}

http::Response HttpServer::observe(const http::Request& req) {
  http::Response res;
  if (req.path == "/health") {
    if (draining_)
      send_json(res, 503, {{"status", "draining"}});
    else if (!ready_)
      send_json(res, 503, {{"status", "loading"}});
    else
      send_json(res, 200, {{"status", "ok"}});
    return res;
  }
  const sched::SchedulerStats stats = ready_ ? scheduler_->stats() : sched::SchedulerStats{};
  metrics_.http_connections = http_ ? http_->connections() : 0;
  const std::optional<KvEventCounts> kv_events =
      config_.kv_event_counts ? std::optional(config_.kv_event_counts()) : std::nullopt;
  res.set_content(
      metrics_.render(stats, page_size_, ready_ ? model_->name : std::string(), kv_events ? &*kv_events : nullptr),
      "text/plain; version=0.0.4");
  return res;
}

http::Response HttpServer::route_metrics_port(const http::Request& req) {
  // /health stays open for orchestrators' probes (Kubernetes sends no key); the key guards /metrics.
  if (config_.protect_metrics && req.path == "/metrics")
    if (auto refused = refuse_without_key(req)) return *refused;
  if (req.method == "GET" && is_observability(req.path)) return observe(req);
  http::Response res;
  metrics_.count_client_error(404);
  send_error(res, api_error(404, "invalid_request_error", "Unknown route: " + req.method + " " + req.path));
  return res;
}

http::Response HttpServer::route(const http::Request& req) {
  http::Response res;
  allow_origin(req, res);
  const bool metrics_here = config_.metrics_port < 0;
  if (req.method == "OPTIONS") {  // CORS preflight: no credentials are sent with it
    const char* methods = allowed_methods(req.path, config_.web_ui, metrics_here);
    res.status = methods ? 204 : 404;
    if (methods) res.set_header("Allow", std::string(methods) + ", OPTIONS");
    if (methods && res.has_header("Access-Control-Allow-Origin")) {
      res.set_header("Access-Control-Allow-Methods", std::string(methods) + ", OPTIONS");
      res.set_header("Access-Control-Allow-Headers", preflight_allowed_headers(req));
      res.set_header("Access-Control-Max-Age", "600");
    }
    return res;
  }
  // Probes (/health, /live, /health_generate) carry no key; what describes or changes the server does.
  const bool protected_path = req.path.rfind("/v1/", 0) == 0 || req.path == "/flush_cache" || req.path == "/tokenize" ||
                              req.path == "/detokenize" || (config_.protect_metrics && req.path == "/metrics") ||
                              req.path.rfind("/get_", 0) == 0 || req.path == "/server_info";
  if (protected_path)
    if (auto refused = refuse_without_key(req)) {
      refused->headers.insert(refused->headers.begin(), res.headers.begin(), res.headers.end());
      return *refused;
    }
  http::Response answer = route_model(req);
  for (const auto& [name, value] : res.headers)  // the CORS headers
    if (!answer.has_header(name)) answer.headers.emplace_back(name, value);
  echo_request_id(req, answer);
  return answer;
}

http::Response HttpServer::route_model(const http::Request& req) {
  http::Response res;
  const bool get = req.method == "GET", post = req.method == "POST";
  auto loading = [&res] {
    send_error(res, server_error(503, "The model is still loading.", "model_loading"));
    return res;
  };
  auto model_card = [this](const std::string& id) {
    return json{{"id", id},
                {"object", "model"},
                {"created", 0},
                {"owned_by", "radixserve"},
                {"root", model_->name},
                {"max_model_len", model_->max_context}};
  };

  if (get && (req.path == "/health" || (req.path == "/metrics" && config_.metrics_port < 0))) return observe(req);
  if (get && req.path == "/" && config_.web_ui) {  // public: the page holds no secrets; its API calls carry the key
    // The page loads nothing from elsewhere and talks only to this server.
    res.set_header("Content-Security-Policy",
                   "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; "
                   "base-uri 'none'; form-action 'none'; frame-ancestors 'none'");
    res.set_header("Cache-Control", "no-cache");
    res.set_content(std::string(chat_page_html()), "text/html; charset=utf-8");
    return res;
  }
  if (get && req.path == "/version") {
    send_json(res, 200, {{"version", config_.version}});
    return res;
  }
  if (get && (req.path == "/v1/models" || req.path == "/v1/models/")) {
    if (!ready_) return loading();
    json data = json::array({model_card(model_->name)});
    for (const std::string& alias : model_->aliases) data.push_back(model_card(alias));
    send_json(res, 200, {{"object", "list"}, {"data", data}});
    return res;
  }
  if (get && req.path.rfind("/v1/models/", 0) == 0 && req.path.size() > 11) {
    if (!ready_) return loading();
    const std::string id = req.path.substr(11);
    if (!model_->serves(id)) {
      send_error(res, api_error(404, "invalid_request_error", "The model `" + id + "` does not exist.", "model",
                                "model_not_found"));
      return res;
    }
    send_json(res, 200, model_card(id));
    return res;
  }
  if (post && (req.path == "/v1/chat/completions" || req.path == "/v1/completions" || req.path == "/v1/messages" ||
               req.path == "/v1/responses")) {
    if (!ready_) return loading();
    if (draining_) {
      metrics_.requests_rejected++;
      send_error(res, server_error(503, "The server is shutting down.", "shutting_down"));
      return res;
    }
    const Endpoint endpoint = req.path == "/v1/chat/completions" ? Endpoint::kChat
                              : req.path == "/v1/messages"       ? Endpoint::kMessages
                              : req.path == "/v1/responses"      ? Endpoint::kResponses
                                                                 : Endpoint::kCompletion;
    return handler_->handle(endpoint, req);
  }
  if (post && req.path == "/v1/embeddings") {
    if (!ready_) return loading();
    if (draining_) {
      metrics_.requests_rejected++;
      send_error(res, server_error(503, "The server is shutting down.", "shutting_down"));
      return res;
    }
    return handler_->handle_embeddings(req);
  }
  if (post && req.path == "/v1/messages/count_tokens") {
    if (!ready_) return loading();
    return handler_->count_message_tokens(req);
  }
  if ((get || req.method == "DELETE") && req.path.rfind("/v1/responses/", 0) == 0 && req.path.size() > 14) {
    if (!ready_) return loading();
    const std::string id = req.path.substr(14);
    const auto entry = handler_->responses().get(id);
    if (!entry || (!get && !handler_->responses().erase(id))) {
      send_error(res, api_error(404, "invalid_request_error", "Response with id '" + id + "' not found.", "response_id",
                                "response_not_found"));
      return res;
    }
    send_json(res, 200, get ? entry->response : json{{"id", id}, {"object", "response.deleted"}, {"deleted", true}});
    return res;
  }
  if (post && (req.path == "/tokenize" || req.path == "/detokenize")) {
    if (!ready_) return loading();
    auto result = req.path == "/tokenize" ? tokenize_request(*model_, req.body) : detokenize_request(*model_, req.body);
    if (auto* error = std::get_if<ApiError>(&result))
      send_error(res, *error);
    else
      send_json(res, 200, std::get<json>(result));
    return res;
  }
  // Liveness: the process answers, loading or not (readiness is /health).
  if (get && req.path == "/live") {
    send_json(res, 200, {{"status", "alive"}});
    return res;
  }
  // The routes routers and gateways probe a replica with (gateway_routes.h).
  if (get && req.path == "/get_model_info") {
    if (!ready_) return loading();
    send_json(res, 200, model_info_json(*model_));
    return res;
  }
  if (get && (req.path == "/get_server_info" || req.path == "/server_info")) {
    if (!ready_) return loading();
    send_json(res, 200, server_info_json(*model_, scheduler_->stats(), page_size_, config_.version));
    return res;
  }
  if (get && req.path == "/get_load") {
    if (!ready_) return loading();
    send_json(res, 200, load_json(scheduler_->stats(), page_size_));
    return res;
  }
  if (get && req.path == "/health_generate") {  // healthy only if a token comes out
    if (!ready_) return loading();
    if (draining_) {
      send_error(res, server_error(503, "The server is shutting down.", "shutting_down"));
      return res;
    }
    const http::Request probe = health_generate_request(*model_);
    return health_generate_answer(model_->embedding ? handler_->handle_embeddings(probe)
                                                    : handler_->handle(Endpoint::kCompletion, probe));
  }
  // Extension (as in SGLang): drop every cached prefix no request uses, e.g. to measure the idle KV level.
  if ((post || get) && req.path == "/flush_cache") {
    if (!ready_) return loading();
    scheduler_->flush_cache();
    send_json(res, 200, {{"status", "ok"}});
    return res;
  }

  if (const char* methods = allowed_methods(req.path, config_.web_ui, config_.metrics_port < 0)) {
    metrics_.count_client_error(405);
    res.set_header("Allow", methods);
    send_error(res, api_error(405, "invalid_request_error",
                              fmt::format("Method {} is not allowed on {}; use {}.", req.method, req.path, methods)));
    return res;
  }
  metrics_.count_client_error(404);
  send_error(res, api_error(404, "invalid_request_error", "Unknown route: " + req.method + " " + req.path));
  return res;
}

}  // namespace rs::server
