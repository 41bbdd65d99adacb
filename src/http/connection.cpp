// Connection: one client connection as a coroutine on its own strand (see server.h for the design).
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <optional>

#include "base/log.h"
#include "http/server_state.h"

namespace rs::http {

using namespace std::chrono_literals;

namespace {

constexpr auto kTick = 500ms;               // a waiting answer is pulled at least this often (SSE keep-alives)
constexpr auto kLingerTime = 2s;            // after a refusal, how long the unread rest of a body is read and dropped
constexpr size_t kLingerBytes = 64u << 20;  // ... and at most how much of it

auto with_error(beast::error_code& ec) { return net::redirect_error(net::use_awaitable, ec); }

std::string percent_decode(std::string_view text) {
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size() && hex(text[i + 1]) >= 0 && hex(text[i + 2]) >= 0) {
      out += static_cast<char>(hex(text[i + 1]) * 16 + hex(text[i + 2]));
      i += 2;
    } else {
      out += text[i];
    }
  }
  return out;
}

bool client_left(const beast::error_code& ec) {
  return ec == bhttp::error::end_of_stream || ec == beast::error::timeout || ec == net::error::eof ||
         ec == net::error::connection_reset || ec == net::error::operation_aborted || ec == net::error::broken_pipe ||
         ec == net::error::bad_descriptor || ec == bhttp::error::partial_message;
}

}  // namespace

// One client connection: a coroutine on its own strand reads requests, hands them to the routes and writes the
// answers; a waiting answer (stream or deferred) sleeps on a timer that its producer cancels to wake it.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(Server::State& server, tcp::socket socket, uint64_t id)
      : server_(server),
        options_(server.options),
        stream_(std::move(socket)),
        wake_timer_(stream_.get_executor()),
        id_(id) {
    beast::error_code ec;
    const tcp::endpoint remote = stream_.socket().remote_endpoint(ec);
    if (!ec) {
      remote_addr_ = remote.address().to_string();
      remote_port_ = remote.port();
    }
  }

  static net::awaitable<void> serve(std::shared_ptr<Connection> self, bool over_limit) {
    try {
      const Request none;  // (coroutine arguments stay lvalues: g++ 12 destroys temporaries passed by value twice)
      if (over_limit)
        co_await self->refuse(503, none);
      else
        co_await self->loop();
    } catch (const std::exception& e) {
      RS_LOG_DEBUG("connection {}:{}: {}", self->remote_addr_, self->remote_port_, e.what());
    }
    self->finish();
  }

  net::any_io_executor executor() { return stream_.get_executor(); }

  // Any thread: ends the connection soon (a pending answer is abandoned).
  void close() {
    net::post(stream_.get_executor(), [self = shared_from_this()] {
      self->closing_ = true;
      beast::error_code ec;
      self->stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
      self->stream_.cancel();
      self->wake_timer_.cancel();
    });
  }

 private:
  net::awaitable<void> loop() {
    for (bool first = true; !closing_; first = false) {
      bhttp::request_parser<bhttp::string_body> parser;
      parser.header_limit(static_cast<std::uint32_t>(options_.max_header_bytes));
      parser.body_limit(options_.max_body_bytes);
      beast::error_code ec;
      stream_.expires_after(std::chrono::seconds(first ? options_.read_timeout_s : options_.keep_alive_timeout_s));
      co_await bhttp::async_read_header(stream_, buffer_, parser, with_error(ec));
      if (closing_) co_return;
      if (ec) {
        co_await refuse_bad_head(ec, !parser.get().target().empty());
        co_return;
      }
      const auto& head = parser.get();
      Request request;
      request.method = std::string(head.method_string());
      const std::string_view target(head.target().data(), head.target().size());
      if (target.size() > options_.max_target_bytes) {
        co_await refuse(414, request);
        co_return;
      }
      const size_t question = target.find('?');
      request.path = percent_decode(target.substr(0, question));
      if (question != std::string_view::npos) request.query = std::string(target.substr(question + 1));
      if (beast::iequals(head[bhttp::field::expect], "100-continue") && !parser.is_done()) {
        stream_.expires_after(std::chrono::seconds(options_.write_timeout_s));
        static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
        co_await net::async_write(stream_, net::buffer(kContinue.data(), kContinue.size()), with_error(ec));
        if (ec) co_return;
      }
      stream_.expires_after(std::chrono::seconds(options_.read_timeout_s));
      if (!parser.is_done()) co_await bhttp::async_read(stream_, buffer_, parser, with_error(ec));
      if (closing_) co_return;
      if (ec) {
        if (ec == bhttp::error::body_limit)
          co_await refuse(413, request);
        else if (!client_left(ec))
          co_await refuse(400, request);
        co_return;
      }
      stream_.expires_never();
      bhttp::request<bhttp::string_body> message = parser.release();
      const bool keep_alive = message.keep_alive();
      for (const auto& field : message)
        request.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
      request.body = std::move(message.body());
      request.remote_addr = remote_addr_;
      request.remote_port = remote_port_;
      const bool head_only = request.method == "HEAD";
      if (head_only) request.method = "GET";  // answered as GET without the body

      // (No co_await inside a conditional expression: g++ 12 miscompiles the temporaries' lifetimes there.)
      Response response;
      if (server_.routes.is_cheap(request))
        response = handle(&server_.routes, &request);
      else
        response = co_await net::co_spawn(server_.workers.get_executor(), handle_async(&server_.routes, &request),
                                          net::use_awaitable);
      const bool answered = co_await answer(response, request, keep_alive && !server_.stopping, head_only);
      if (!answered) co_return;
      if (!keep_alive || server_.stopping) co_return;
      stop_watching();
    }
  }

  static Response handle(const Routes* routes, const Request* request) {
    try {
      return routes->handle(*request);
    } catch (const std::exception& e) {
      RS_LOG_ERROR("{} {} failed: {}", request->method, request->path, e.what());
      return routes->refusal(500, *request);
    }
  }
  static net::awaitable<Response> handle_async(const Routes* routes, const Request* request) {
    co_return handle(routes, request);
  }

  // The head of a request could not be read: the client left, went silent, or sent something that is not HTTP.
  // start_line_read: the parser got past the request line (so a header-limit error is about the headers).
  net::awaitable<void> refuse_bad_head(const beast::error_code& ec, bool start_line_read) {
    const Request none;
    if (ec == bhttp::error::header_limit) {
      co_await refuse(start_line_read ? 431 : 414, none);
    } else if (ec == bhttp::error::body_limit) {
      co_await refuse(413, none);
    } else if (!client_left(ec) && buffer_.size() > 0) {
      co_await refuse(400, none);
    }
  }

  // Answers `status` (formatted by the routes) and closes: what the client may still be sending is read and dropped
  // for a moment first, so that closing with unread bytes (a TCP reset) cannot destroy the answer before it is read.
  net::awaitable<void> refuse(int status, const Request& partial) {
    Response response = server_.routes.refusal(status, partial);
    const bool written = co_await write_whole(response, /*keep_alive=*/false, /*head_only=*/false);
    if (!written) co_return;
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    stream_.expires_after(kLingerTime);
    std::vector<char> sink(16u << 10);
    for (size_t dropped = 0; !ec && dropped < kLingerBytes && !closing_;)
      dropped += co_await stream_.async_read_some(net::buffer(sink), with_error(ec));
  }

  // Writes the response (waiting for a deferred one, streaming a chunked one). False when the connection is done.
  net::awaitable<bool> answer(Response& response, const Request& request, bool keep_alive, bool head_only) {
    if (response.deferred) {
      std::shared_ptr<DeferredResponse> deferred = std::move(response.deferred);
      deferred->start(waker());
      watch_peer();
      for (;;) {
        wake_pending_ = false;
        if (std::optional<Response> ready = deferred->poll()) {
          for (auto& [name, value] : response.headers)  // set around the deferred answer (CORS): kept
            if (!ready->has_header(name)) ready->headers.emplace_back(std::move(name), std::move(value));
          response = std::move(*ready);
          break;
        }
        if (peer_closed_ || closing_) {
          deferred->abandon();
          co_return false;
        }
        co_await wait_for_wake();
      }
    }
    if (!response.chunks) {
      if (closing_) co_return false;
      co_return co_await write_whole(response, keep_alive, head_only);
    }
    std::shared_ptr<ChunkSource> source = std::move(response.chunks);
    if (closing_ || head_only) {
      source->abandon();
      if (closing_) co_return false;
      co_return co_await write_whole(response, keep_alive, head_only);
    }
    bhttp::response<bhttp::empty_body> head;
    fill_head(head, response, keep_alive);
    head.chunked(true);
    bhttp::response_serializer<bhttp::empty_body> serializer(head);
    beast::error_code ec;
    stream_.expires_after(std::chrono::seconds(options_.write_timeout_s));
    co_await bhttp::async_write_header(stream_, serializer, with_error(ec));
    if (ec) {
      source->abandon();
      co_return false;
    }
    source->start(waker());
    watch_peer();
    for (std::string out;;) {
      wake_pending_ = false;
      out.clear();
      const bool done = source->pull(out);
      if (!out.empty()) {
        stream_.expires_after(std::chrono::seconds(options_.write_timeout_s));
        co_await net::async_write(stream_, bhttp::make_chunk(net::buffer(out)), with_error(ec));
        if (ec) {
          if (!done) source->abandon();
          co_return false;
        }
      }
      if (done) {
        stream_.expires_after(std::chrono::seconds(options_.write_timeout_s));
        co_await net::async_write(stream_, bhttp::make_chunk_last(), with_error(ec));
        stream_.expires_never();
        co_return !ec;
      }
      if (peer_closed_ || closing_) {
        source->abandon();
        co_return false;
      }
      stream_.expires_never();
      co_await wait_for_wake();
    }
  }

  template <typename Body>
  static void fill_head(bhttp::response<Body>& head, const Response& response, bool keep_alive) {
    head.version(11);
    head.result(static_cast<unsigned>(response.status));
    for (const auto& [name, value] : response.headers) head.insert(name, value);
    if (!response.content_type.empty()) head.set(bhttp::field::content_type, response.content_type);
    head.keep_alive(keep_alive);
  }

  net::awaitable<bool> write_whole(const Response& response, bool keep_alive, bool head_only) {
    beast::error_code ec;
    stream_.expires_after(std::chrono::seconds(options_.write_timeout_s));
    if (head_only) {
      bhttp::response<bhttp::empty_body> head;
      fill_head(head, response, keep_alive);
      head.content_length(response.body.size());
      co_await bhttp::async_write(stream_, head, with_error(ec));
    } else {
      bhttp::response<bhttp::string_body> message;
      fill_head(message, response, keep_alive);
      message.body() = response.body;
      message.prepare_payload();
      co_await bhttp::async_write(stream_, message, with_error(ec));
    }
    stream_.expires_never();
    co_return !ec;
  }

  Waker waker() {
    return [weak = weak_from_this()] {
      if (std::shared_ptr<Connection> self = weak.lock()) self->wake();
    };
  }

  // Any thread: the pending answer has news. One post per wait, however many tokens arrive meanwhile.
  void wake() {
    if (wake_pending_.exchange(true)) return;
    net::post(stream_.get_executor(), [self = shared_from_this()] { self->wake_timer_.cancel(); });
  }

  net::awaitable<void> wait_for_wake() {
    if (wake_pending_) co_return;  // a wake is on its way: pull at once (its cancel may cut a later wait short)
    wake_timer_.expires_after(kTick);
    beast::error_code ec;
    co_await wake_timer_.async_wait(with_error(ec));
  }

  // While an answer is pending, notices the client closing (or half-closing) its side, without reading its data.
  void watch_peer() {
    if (watching_) return;
    watching_ = true;
    const uint64_t round = ++watch_round_;
    stream_.socket().async_wait(tcp::socket::wait_read, [self = shared_from_this(), round](beast::error_code ec) {
      if (round != self->watch_round_) return;  // a watch from an earlier answer
      self->watching_ = false;
      if (ec || !self->stream_.socket().is_open()) return;
      char byte;
      const ssize_t n = ::recv(self->stream_.socket().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
        self->peer_closed_ = true;
        self->wake_timer_.cancel();
      }
      // n > 0: the client sent its next request already; it is read once this answer is written.
    });
  }

  void stop_watching() {
    if (!watching_) return;
    ++watch_round_;
    watching_ = false;
    beast::error_code ec;
    stream_.socket().cancel(ec);
  }

  void finish() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.socket().close(ec);
    wake_timer_.cancel();
    std::lock_guard lock(server_.mutex);
    server_.live.erase(id_);
    server_.open = static_cast<int64_t>(server_.live.size());
  }

  Server::State& server_;
  const ServerOptions& options_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  net::steady_timer wake_timer_;
  std::atomic<bool> wake_pending_{false};
  const uint64_t id_;
  std::string remote_addr_;
  int remote_port_ = 0;
  bool closing_ = false;
  bool peer_closed_ = false;
  bool watching_ = false;
  uint64_t watch_round_ = 0;
};

std::shared_ptr<Connection> make_connection(Server::State& state, tcp::socket socket, uint64_t id) {
  return std::make_shared<Connection>(state, std::move(socket), id);
}

void serve_connection(std::shared_ptr<Connection> connection, bool over_limit) {
  const net::any_io_executor executor = connection->executor();
  net::co_spawn(executor, Connection::serve(std::move(connection), over_limit), net::detached);
}

void close_connection(Connection& connection) { connection.close(); }

}  // namespace rs::http
