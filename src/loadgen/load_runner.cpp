#include "loadgen/load_runner.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "base/error.h"
#include "loadgen/completion_stream.h"
#include "loadgen/http_response_parser.h"
#include "loadgen/net_util.h"
#include "loadgen/sse_parser.h"

namespace rs::loadgen {
namespace {

using SteadyClock = std::chrono::steady_clock;
constexpr size_t kMaxErrorBody = 300;  // bytes of a non-200 body kept for the report

// One TCP connection and the request it carries.
struct Connection {
  int fd = -1;
  int32_t request = -1;     // index of the request it carries; -1: idle
  bool connecting = false;  // non-blocking connect in progress
  bool reused = false;      // carried an earlier request: a close before any answer byte is retried once
  bool got_bytes = false;   // some of the current answer arrived
  size_t written = 0;       // bytes of the request sent
  HttpResponseParser http;
  SseParser sse;
  CompletionStream stream;
  std::string error_body;  // start of a non-200 answer
};

class Loop {
 public:
  Loop(const BaseUrl& url, const std::vector<std::string>& requests, const LoadOptions& options)
      : address_(resolve(url)), requests_(requests), options_(options), retried_(requests.size(), false) {
    RS_CHECK(options.concurrency > 0 || !options.arrivals_s.empty(), "neither a concurrency nor arrival times");
    RS_CHECK(options.arrivals_s.empty() || options.arrivals_s.size() == requests.size(),
             "{} arrival times for {} requests", options.arrivals_s.size(), requests.size());
    epoll_ = ::epoll_create1(EPOLL_CLOEXEC);
    RS_CHECK(epoll_ >= 0, "epoll_create1: {}", std::strerror(errno));
    run_.results.resize(requests.size());
  }
  ~Loop() {
    for (auto& connection : connections_)
      if (connection->fd >= 0) ::close(connection->fd);
    ::close(epoll_);
  }

  LoadRun run();

 private:
  double now_s() const { return std::chrono::duration<double>(SteadyClock::now() - start_).count(); }
  RequestResult& result_of(const Connection& c) { return run_.results[c.request]; }
  void start(int32_t request);
  Connection* open();
  void watch(Connection& c, uint32_t events, int op = EPOLL_CTL_MOD);
  void on_event(Connection& c, uint32_t events);
  void on_writable(Connection& c);
  void on_readable(Connection& c);
  void on_body(Connection& c, std::string_view body);
  void complete(Connection& c, bool closing);
  void fail(Connection& c, ErrorKind kind, std::string detail);
  void end_request(Connection& c);
  void close_connection(Connection& c);
  void check_timeouts();
  void report_progress();
  bool may_start() const;
  int wait_ms() const;

  Address address_;
  const std::vector<std::string>& requests_;
  const LoadOptions& options_;
  std::vector<bool> retried_;
  int epoll_ = -1;
  SteadyClock::time_point start_;
  // Closed connections are freed only by check_timeouts, between event batches: a batch may still name one.
  std::vector<std::unique_ptr<Connection>> connections_;
  std::vector<Connection*> idle_;
  int32_t next_ = 0;
  int64_t finished_ = 0, errors_ = 0, in_flight_ = 0;
  LoadRun run_;
  // One receive buffer for the loop (a thread_local array would sit in the static TLS of every thread of the process
  // that links loadgen: 64 KiB per HTTP worker of `serve`).
  std::vector<char> read_buffer_ = std::vector<char>(64 * 1024);
};

LoadRun Loop::run() {
  raise_open_file_limit();
  const double cpu_start = thread_cpu_seconds();
  start_ = SteadyClock::now();
  double last_check = 0, last_progress = 0, last_end = 0;
  const int32_t total = static_cast<int32_t>(requests_.size());
  epoll_event events[512];
  while (finished_ < total) {
    while (next_ < total && may_start()) start(next_++);
    const int ready = ::epoll_wait(epoll_, events, 512, wait_ms());
    RS_CHECK(ready >= 0 || errno == EINTR, "epoll_wait: {}", std::strerror(errno));
    for (int i = 0; i < ready; ++i) {
      auto* connection = static_cast<Connection*>(events[i].data.ptr);
      if (connection->fd >= 0) on_event(*connection, events[i].events);
    }
    const double now = now_s();
    if (now - last_check >= 0.05) {  // between batches: no pending event names a connection dropped here
      check_timeouts();
      last_check = now;
    }
    if (now - last_progress >= 1.0) {
      report_progress();
      last_progress = now;
    }
    last_end = now;
  }
  double first_send = last_end, last_answer = 0;
  for (const RequestResult& r : run_.results) {
    first_send = std::min(first_send, r.start_s);
    last_answer = std::max(last_answer, r.start_s + r.latency_s);
  }
  run_.duration_s = std::max(0.0, std::min(last_answer, last_end) - first_send);
  report_progress();
  run_.cpu_s = thread_cpu_seconds() - cpu_start;
  return std::move(run_);
}

bool Loop::may_start() const {
  if (options_.concurrency > 0 && in_flight_ >= options_.concurrency) return false;
  return options_.arrivals_s.empty() || options_.arrivals_s[next_] <= now_s();
}

int Loop::wait_ms() const {
  int ms = 50;  // timeouts and progress are checked at least this often
  const bool capped = options_.concurrency > 0 && in_flight_ >= options_.concurrency;
  if (!options_.arrivals_s.empty() && next_ < static_cast<int32_t>(requests_.size()) && !capped) {
    const double until = options_.arrivals_s[next_] - now_s();
    ms = std::clamp(static_cast<int>(std::ceil(until * 1e3)), 0, ms);
  }
  return ms;
}

void Loop::start(int32_t request) {
  RequestResult& result = run_.results[request];
  if (!retried_[request]) result.start_s = now_s();  // a retry keeps its first start: the wait counts
  ++in_flight_;
  run_.max_in_flight = std::max<int32_t>(run_.max_in_flight, static_cast<int32_t>(in_flight_));
  Connection* c = nullptr;
  if (!idle_.empty()) {
    c = idle_.back();
    idle_.pop_back();
  } else {
    c = open();
    if (c == nullptr) {
      result.error = ErrorKind::kConnect;
      result.error_detail = std::strerror(errno);
      result.latency_s = now_s() - result.start_s;
      --in_flight_;
      ++finished_;
      ++errors_;
      return;
    }
  }
  c->request = request;
  c->written = 0;
  c->got_bytes = false;
  c->http.reset();
  c->sse = SseParser();
  c->stream = CompletionStream();
  c->error_body.clear();
  if (!c->connecting) on_writable(*c);
}

Connection* Loop::open() {
  const int fd = ::socket(address_.family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return nullptr;
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  const int rc = ::connect(fd, reinterpret_cast<const sockaddr*>(&address_.storage), address_.length);
  if (rc != 0 && errno != EINPROGRESS) {
    const int saved = errno;
    ::close(fd);
    errno = saved;
    return nullptr;
  }
  auto& c = connections_.emplace_back(std::make_unique<Connection>());
  c->fd = fd;
  c->connecting = rc != 0;
  ++run_.connections_opened;
  watch(*c, EPOLLIN | EPOLLOUT | EPOLLRDHUP, EPOLL_CTL_ADD);
  return c.get();
}

void Loop::watch(Connection& c, uint32_t events, int op) {
  epoll_event event{};
  event.events = events;
  event.data.ptr = &c;
  RS_CHECK(::epoll_ctl(epoll_, op, c.fd, &event) == 0, "epoll_ctl: {}", std::strerror(errno));
}

void Loop::on_event(Connection& c, uint32_t events) {
  if (c.request < 0) {  // idle: the server closed it (or sent something unasked for)
    idle_.erase(std::remove(idle_.begin(), idle_.end(), &c), idle_.end());
    close_connection(c);
    return;
  }
  if (c.connecting) {
    if (!(events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) return;
    int error = 0;
    socklen_t length = sizeof(error);
    ::getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &error, &length);
    if (error != 0) return fail(c, ErrorKind::kConnect, std::strerror(error));
    c.connecting = false;
  }
  if (c.written < requests_[c.request].size()) {
    on_writable(c);
    if (c.fd < 0 || c.request < 0) return;
  }
  if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) on_readable(c);
}

void Loop::on_writable(Connection& c) {
  const std::string& request = requests_[c.request];
  while (c.written < request.size()) {
    const ssize_t sent = ::send(c.fd, request.data() + c.written, request.size() - c.written, MSG_NOSIGNAL);
    if (sent > 0) {
      c.written += static_cast<size_t>(sent);
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      return watch(c, EPOLLIN | EPOLLOUT | EPOLLRDHUP);
    } else if (errno != EINTR) {
      return on_readable(c);  // the peer is gone: recv reports how (and a stale keep-alive is retried)
    }
  }
  watch(c, EPOLLIN | EPOLLRDHUP);
}

void Loop::on_readable(Connection& c) {
  char* buffer = read_buffer_.data();
  while (c.fd >= 0 && c.request >= 0) {
    const ssize_t got = ::recv(c.fd, buffer, read_buffer_.size(), 0);
    if (got > 0) {
      c.got_bytes = true;
      if (!c.http.feed(std::string_view(buffer, got), [&](std::string_view body) { on_body(c, body); }))
        return fail(c, ErrorKind::kMalformed, "HTTP: " + c.http.error());
      if (c.http.done()) return complete(c, !c.http.keep_alive());
      if (static_cast<size_t>(got) < read_buffer_.size()) return;  // drained: spare the recv that would say EAGAIN
      continue;
    }
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (got < 0 && errno == EINTR) continue;
    // Closed (0) or reset (< 0).
    if (c.http.finish_on_close()) return complete(c, true);
    if (c.reused && !c.got_bytes && !retried_[c.request]) {  // a keep-alive connection the server had dropped
      const int32_t request = c.request;
      retried_[request] = true;
      c.request = -1;
      close_connection(c);
      --in_flight_;
      return start(request);
    }
    return fail(c, ErrorKind::kDisconnected, got == 0 ? "connection closed mid-answer" : std::strerror(errno));
  }
}

void Loop::on_body(Connection& c, std::string_view body) {
  if (c.http.status() != 200) {
    c.error_body.append(body.substr(0, kMaxErrorBody - std::min(kMaxErrorBody, c.error_body.size())));
    return;
  }
  const double now = now_s();
  c.sse.feed(body, [&](std::string_view data) { c.stream.on_event(data, now, result_of(c)); });
}

void Loop::complete(Connection& c, bool closing) {
  RequestResult& result = result_of(c);
  result.http_status = c.http.status();
  if (c.http.status() != 200) {
    result.latency_s = now_s() - result.start_s;
    if (result.ok()) {
      result.error = ErrorKind::kHttpStatus;
      result.error_detail = "HTTP " + std::to_string(c.http.status()) + ": " + c.error_body;
    }
  } else {
    c.stream.on_end(now_s(), result);
  }
  end_request(c);
  if (closing) {
    close_connection(c);
  } else {
    c.reused = true;
    idle_.push_back(&c);
  }
}

void Loop::fail(Connection& c, ErrorKind kind, std::string detail) {
  RequestResult& result = result_of(c);
  result.latency_s = now_s() - result.start_s;
  if (result.ok()) {
    result.error = kind;
    result.error_detail = std::move(detail);
  }
  end_request(c);
  close_connection(c);
}

void Loop::end_request(Connection& c) {
  if (!result_of(c).ok()) ++errors_;
  c.request = -1;
  --in_flight_;
  ++finished_;
}

void Loop::close_connection(Connection& c) {
  if (c.fd >= 0) ::close(c.fd);  // also leaves the epoll set
  c.fd = -1;
}

void Loop::check_timeouts() {
  const double now = now_s();
  for (auto& connection : connections_) {
    Connection& c = *connection;
    if (c.fd >= 0 && c.request >= 0 && now - result_of(c).start_s > options_.timeout_s)
      fail(c, ErrorKind::kTimeout, "no complete answer after " + std::to_string(options_.timeout_s) + " s");
  }
  std::erase_if(connections_, [](const std::unique_ptr<Connection>& c) { return c->fd < 0; });
}

void Loop::report_progress() {
  if (!options_.on_progress) return;
  options_.on_progress(LoadProgress{.total = static_cast<int64_t>(requests_.size()),
                                    .finished = finished_,
                                    .errors = errors_,
                                    .in_flight = in_flight_,
                                    .elapsed_s = now_s()});
}

}  // namespace

LoadRun run_load(const BaseUrl& url, const std::vector<std::string>& requests, const LoadOptions& options) {
  Loop loop(url, requests, options);
  return loop.run();
}

}  // namespace rs::loadgen
