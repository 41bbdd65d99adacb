#include "http/server.h"

#include <sys/resource.h>

#include <chrono>

#include "base/error.h"
#include "base/log.h"
#include "http/server_state.h"

namespace rs::http {

using namespace std::chrono_literals;

namespace {

constexpr auto kStopGrace = 3s;  // stop(): how long closed connections get to unwind

auto with_error(beast::error_code& ec) { return net::redirect_error(net::use_awaitable, ec); }

}  // namespace

namespace {

// `state` outlives the loop: Server::stop joins the I/O threads, then destroys the state and this frame with it.
net::awaitable<void> accept_loop(Server::State* state) {
  net::steady_timer pause(state->acceptor.get_executor());
  for (;;) {
    beast::error_code ec;
    tcp::socket socket = co_await state->acceptor.async_accept(net::make_strand(state->io), with_error(ec));
    if (state->stopping || !state->acceptor.is_open()) co_return;
    if (ec) {
      // Out of descriptors (or a transient error): the pending connection waits in the backlog; retry shortly.
      RS_LOG_WARN("accept failed: {}", ec.message());
      pause.expires_after(50ms);
      co_await pause.async_wait(with_error(ec));
      continue;
    }
    socket.set_option(tcp::no_delay(true), ec);  // streamed tokens are small writes: never hold them (Nagle)
    std::shared_ptr<Connection> connection;
    bool over_limit = false;
    {
      std::lock_guard lock(state->mutex);
      over_limit = static_cast<int64_t>(state->live.size()) >= state->options.max_connections;
      const uint64_t id = state->next_id++;
      connection = make_connection(*state, std::move(socket), id);
      state->live.emplace(id, connection);
      state->open = static_cast<int64_t>(state->live.size());
    }
    serve_connection(std::move(connection), over_limit);
  }
}

int default_cores() { return std::max(1, static_cast<int>(std::thread::hardware_concurrency())); }

}  // namespace

Server::Server(ServerOptions options, Routes routes) : options_(std::move(options)), routes_(std::move(routes)) {
  if (options_.io_threads <= 0) options_.io_threads = std::min(default_cores(), 4);
  if (options_.worker_threads <= 0) options_.worker_threads = std::max(4, default_cores());
}

Server::~Server() { stop(); }

int64_t Server::connections() const { return state_ ? state_->open.load() : 0; }

void Server::start() {
  RS_CHECK(!state_, "the HTTP server is already started");
  auto state = std::make_shared<State>(options_, routes_);
  beast::error_code ec;
  tcp::resolver resolver(state->io);
  const auto endpoints = resolver.resolve(options_.host, std::to_string(options_.port), tcp::resolver::passive, ec);
  RS_CHECK(!ec && !endpoints.empty(), "cannot listen on {}:{} (unknown host: {})", options_.host, options_.port,
           ec.message());
  const tcp::endpoint endpoint = *endpoints.begin();
  tcp::acceptor& acceptor = state->acceptor;
  acceptor.open(endpoint.protocol(), ec);
  RS_CHECK(!ec, "cannot open a socket for {}:{}: {}", options_.host, options_.port, ec.message());
  // SO_REUSEADDR lets a restarted server bind while old connections sit in TIME_WAIT; no SO_REUSEPORT, which would
  // let a second server bind the same port and silently take half its connections.
  acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  acceptor.bind(endpoint, ec);
  RS_CHECK(!ec, "cannot listen on {}:{} (address in use or not available: {})", options_.host, options_.port,
           ec.message());
  acceptor.listen(options_.backlog, ec);
  RS_CHECK(!ec, "cannot listen on {}:{}: {}", options_.host, options_.port, ec.message());
  port_ = acceptor.local_endpoint().port();
  net::co_spawn(acceptor.get_executor(), accept_loop(state.get()), net::detached);
  for (int t = 0; t < options_.io_threads; ++t) state->io_threads.emplace_back([io = &state->io] { io->run(); });
  state_ = std::move(state);
}

void Server::stop() {
  if (!state_) return;
  std::shared_ptr<State> state = std::move(state_);
  state->stopping = true;
  net::post(state->acceptor.get_executor(), [state = state.get()] {
    beast::error_code ec;
    state->acceptor.close(ec);
  });
  {
    std::lock_guard lock(state->mutex);
    for (auto& [id, weak] : state->live)
      if (std::shared_ptr<Connection> connection = weak.lock()) close_connection(*connection);
  }
  const auto deadline = std::chrono::steady_clock::now() + kStopGrace;
  while (state->open > 0 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(5ms);
  state->io.stop();
  for (std::thread& thread : state->io_threads) thread.join();
  state->workers.join();
  // Destroying the state destroys the coroutines still suspended in it: their pending answers are released (a
  // generation's destructor aborts its requests), so the application's objects must still be alive here.
  state.reset();
}

void raise_open_file_limit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return;
  limit.rlim_cur = limit.rlim_max;
  (void)::setrlimit(RLIMIT_NOFILE, &limit);
}

}  // namespace rs::http
