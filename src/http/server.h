// rs::http::Server: an event-driven HTTP/1.1 server (Boost.Asio and Beast). A few I/O threads carry every connection
// as a coroutine: reading requests, keep-alive waits, writes, and streams waiting for their next token cost no thread.
// Handlers run on a small worker pool (they parse, tokenize, render templates), or inline when they are cheap
// (/health must answer while the pool is busy). Limits on bodies, headers, time and connections answer with statuses
// the application formats.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "http/message.h"

namespace rs::http {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;                         // 0 = any free port
  int io_threads = 0;                   // 0 = min(cores, 4)
  int worker_threads = 0;               // handlers; 0 = max(2, cores)
  size_t max_body_bytes = 64u << 20;    // larger bodies get 413
  size_t max_header_bytes = 64u << 10;  // request line and headers; larger get 431
  size_t max_target_bytes = 16u << 10;  // a longer request target gets 414
  int read_timeout_s = 30;              // a client silent this long mid-request is dropped
  int write_timeout_s = 30;             // a client not reading for this long is dropped
  int keep_alive_timeout_s = 60;        // an idle connection (no request begun) is closed after this long
  int64_t max_connections = 10000;      // past this, new connections get 503 and are closed
  int backlog = 4096;                   // listen backlog (the kernel caps it at net.core.somaxconn)
};

// What the application does with requests and with the server's own refusals.
struct Routes {
  std::function<Response(const Request&)> handle;
  // True when handle() answers this request at once (no parsing or tokenizing): it then runs on the I/O thread.
  std::function<bool(const Request&)> is_cheap;
  // The body of a refusal the server makes itself (400, 408, 413, 414, 431, 503 for too many connections), given the
  // status and what is known of the request (method and path may be empty).
  std::function<Response(int status, const Request& partial)> refusal;
};

class Server {
 public:
  Server(ServerOptions options, Routes routes);
  ~Server();  // stops
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds and listens, then serves on background threads. Throws rs::Error when the address cannot be bound.
  void start();
  int port() const { return port_; }
  // Connections open now.
  int64_t connections() const;
  // Stops accepting, closes every connection (their pending answers are abandoned) and joins the threads. Idempotent.
  void stop();

  struct State;  // the I/O machinery (server.cpp)

 private:
  ServerOptions options_;
  Routes routes_;
  std::shared_ptr<State> state_;
  int port_ = 0;
};

// Raises the soft limit on open files to the hard limit (many connections need many descriptors).
void raise_open_file_limit();

}  // namespace rs::http
