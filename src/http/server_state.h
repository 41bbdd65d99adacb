// Internal to rs::http: the server's shared state and the connection entry points (server.cpp and connection.cpp).
#pragma once

// Boost 1.74's asio/awaitable.hpp uses std::exchange without including <utility>.
#include <utility>

#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "http/server.h"

namespace rs::http {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = net::ip::tcp;

class Connection;

struct Server::State {
  State(ServerOptions opts, Routes r)
      : options(std::move(opts)),
        routes(std::move(r)),
        acceptor(net::make_strand(io)),
        workers(options.worker_threads) {}

  ServerOptions options;
  Routes routes;
  net::io_context io;
  tcp::acceptor acceptor;
  net::thread_pool workers;
  std::vector<std::thread> io_threads;
  std::atomic<bool> stopping{false};
  std::mutex mutex;  // guards live and next_id
  std::unordered_map<uint64_t, std::weak_ptr<Connection>> live;
  uint64_t next_id = 0;
  std::atomic<int64_t> open{0};
};

// Starts serving a connection (registered in Server::State::live): its requests, or at once a 503 when
// over_limit (too many connections).
void serve_connection(std::shared_ptr<Connection> connection, bool over_limit);
std::shared_ptr<Connection> make_connection(Server::State& state, tcp::socket socket, uint64_t id);
// Any thread: ends the connection soon (a pending answer is abandoned).
void close_connection(Connection& connection);

}  // namespace rs::http
