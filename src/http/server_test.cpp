// rs::http::Server: keep-alive, deferred and chunked answers woken from other threads, disconnects noticed while an
// answer waits, the limits' refusals, thousands of open connections on two I/O threads, and stop() with answers
// pending.
#include "http/server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "base/error.h"

namespace rs::http {
namespace {

using namespace std::chrono_literals;

// A deferred answer that another thread completes (for every request it was handed to).
class ManualDeferred : public DeferredResponse {
 public:
  void start(Waker wake) override {
    std::lock_guard lock(mutex_);
    wakes_.push_back(std::move(wake));
    started = true;
  }
  std::optional<Response> poll() override {
    std::lock_guard lock(mutex_);
    if (!ready_) return std::nullopt;
    Response response;
    response.set_content(*ready_, "text/plain");
    return response;
  }
  void abandon() override { abandoned = true; }
  void complete(std::string body) {
    std::vector<Waker> wakes;
    {
      std::lock_guard lock(mutex_);
      ready_ = std::move(body);
      wakes = wakes_;
    }
    for (const Waker& wake : wakes) wake();
  }

  std::atomic<bool> started{false}, abandoned{false};

 private:
  std::mutex mutex_;
  std::vector<Waker> wakes_;
  std::optional<std::string> ready_;
};

// Chunks another thread adds; done after `total` of them.
class ManualChunks : public ChunkSource {
 public:
  explicit ManualChunks(int total) : total_(total) {}
  void start(Waker wake) override {
    std::lock_guard lock(mutex_);
    wake_ = std::move(wake);
    started = true;
  }
  bool pull(std::string& out) override {
    std::lock_guard lock(mutex_);
    out += pending_;
    pending_.clear();
    return sent_ == total_;
  }
  void abandon() override { abandoned = true; }
  void add(const std::string& chunk) {
    Waker wake;
    {
      std::lock_guard lock(mutex_);
      pending_ += chunk;
      ++sent_;
      wake = wake_;
    }
    if (wake) wake();
  }

  std::atomic<bool> started{false}, abandoned{false};

 private:
  std::mutex mutex_;
  Waker wake_;
  std::string pending_;
  int sent_ = 0;
  const int total_;
};

struct Fixture {
  std::shared_ptr<ManualDeferred> deferred = std::make_shared<ManualDeferred>();
  std::shared_ptr<ManualChunks> chunks = std::make_shared<ManualChunks>(3);
  std::atomic<int> handled{0};

  Routes routes() {
    Routes routes;
    routes.is_cheap = [](const Request& req) { return req.path == "/health"; };
    routes.handle = [this](const Request& req) {
      ++handled;
      Response res;
      if (req.path == "/health") {
        res.set_content("ok", "text/plain");
      } else if (req.path == "/echo") {
        res.set_content(req.method + " " + req.body + " " + std::string(req.header("X-Test")), "text/plain");
      } else if (req.path == "/deferred") {
        res.deferred = deferred;
      } else if (req.path == "/chunks") {
        res.chunks = chunks;
        res.content_type = "text/event-stream";
      } else if (req.path == "/throw") {
        throw Error("handler failed");
      } else {
        res.status = 404;
      }
      return res;
    };
    routes.refusal = [](int status, const Request&) {
      Response res;
      res.status = status;
      res.set_content("refused " + std::to_string(status), "text/plain");
      return res;
    };
    return routes;
  }
};

int connect_to(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

void send_all(int fd, const std::string& data) {
  for (size_t sent = 0; sent < data.size();) {
    const ssize_t n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return;
    sent += static_cast<size_t>(n);
  }
}

// Reads until `needle` arrives, the peer closes, or 5 s pass.
std::string read_until(int fd, const std::string& needle) {
  std::string got;
  timeval timeout{.tv_sec = 5, .tv_usec = 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  char buf[4096];
  while (got.find(needle) == std::string::npos) {
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  return got;
}

template <typename Predicate>
bool eventually(Predicate predicate) {
  for (int i = 0; i < 500 && !predicate(); ++i) std::this_thread::sleep_for(10ms);
  return predicate();
}

TEST(HttpServer, KeepAliveServesSeveralRequestsOnOneConnection) {
  Fixture fixture;
  Server server(ServerOptions{.io_threads = 2, .worker_threads = 2}, fixture.routes());
  server.start();
  httplib::Client client("127.0.0.1", server.port());
  client.set_keep_alive(true);
  for (int i = 0; i < 3; ++i) {
    const auto res = client.Post("/echo", {{"X-Test", "h" + std::to_string(i)}}, "body", "text/plain");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 200);
    EXPECT_EQ(res->body, "POST body h" + std::to_string(i));
  }
  EXPECT_EQ(server.connections(), 1);
  const auto head = client.Head("/echo");
  ASSERT_TRUE(head);
  EXPECT_EQ(head->status, 200);
  EXPECT_TRUE(head->body.empty());
  const auto failed = client.Get("/throw");
  ASSERT_TRUE(failed);
  EXPECT_EQ(failed->status, 500);
  EXPECT_EQ(failed->body, "refused 500");
  server.stop();
}

TEST(HttpServer, DeferredAnswerWaitsWithoutAThreadAndIsWokenFromAnother) {
  Fixture fixture;
  Server server(ServerOptions{.io_threads = 1, .worker_threads = 1}, fixture.routes());
  server.start();
  std::thread producer([&] {
    ASSERT_TRUE(eventually([&] { return fixture.deferred->started.load(); }));
    std::this_thread::sleep_for(50ms);
    fixture.deferred->complete("late answer");
  });
  httplib::Client client("127.0.0.1", server.port());
  httplib::Client other("127.0.0.1", server.port());
  const auto start = std::chrono::steady_clock::now();
  std::thread waiting([&] {
    const auto res = client.Get("/deferred");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->body, "late answer");
  });
  // The one I/O thread and the one worker stay free for others while the answer waits.
  ASSERT_TRUE(eventually([&] { return fixture.deferred->started.load(); }));
  EXPECT_EQ(other.Get("/health")->body, "ok");
  EXPECT_EQ(other.Post("/echo", "x", "text/plain")->body, "POST x ");
  waiting.join();
  producer.join();
  // Woken, not found by the 500 ms tick.
  EXPECT_LT(std::chrono::steady_clock::now() - start, 450ms);
  EXPECT_FALSE(fixture.deferred->abandoned);
  server.stop();
}

TEST(HttpServer, ClientClosingWhileAnAnswerWaitsAbandonsIt) {
  Fixture fixture;
  Server server(ServerOptions{.io_threads = 1, .worker_threads = 1}, fixture.routes());
  server.start();
  const int fd = connect_to(server.port());
  ASSERT_GE(fd, 0);
  send_all(fd, "GET /deferred HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_TRUE(eventually([&] { return fixture.deferred->started.load(); }));
  ::shutdown(fd, SHUT_WR);  // a half-close counts as gone, as nginx treats it
  EXPECT_TRUE(eventually([&] { return fixture.deferred->abandoned.load(); }));
  ::close(fd);
  EXPECT_TRUE(eventually([&] { return server.connections() == 0; }));
  server.stop();
}

TEST(HttpServer, ChunksStreamAsTheyArriveAndADisconnectAbandonsTheRest) {
  Fixture fixture;
  Server server(ServerOptions{.io_threads = 1, .worker_threads = 1}, fixture.routes());
  server.start();
  int fd = connect_to(server.port());
  ASSERT_GE(fd, 0);
  send_all(fd, "GET /chunks HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_TRUE(eventually([&] { return fixture.chunks->started.load(); }));
  fixture.chunks->add("first;");
  std::string got = read_until(fd, "first;");
  EXPECT_NE(got.find("Transfer-Encoding: chunked"), std::string::npos) << got;
  EXPECT_NE(got.find("Content-Type: text/event-stream"), std::string::npos) << got;
  fixture.chunks->add("second;");
  fixture.chunks->add("third;");
  got = read_until(fd, "0\r\n\r\n");
  EXPECT_NE(got.find("second;"), std::string::npos) << got;
  EXPECT_NE(got.find("third;"), std::string::npos) << got;
  EXPECT_FALSE(fixture.chunks->abandoned);
  ::close(fd);

  fixture.chunks = std::make_shared<ManualChunks>(3);
  fd = connect_to(server.port());
  send_all(fd, "GET /chunks HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_TRUE(eventually([&] { return fixture.chunks->started.load(); }));
  fixture.chunks->add("only one;");
  read_until(fd, "only one;");
  ::close(fd);  // gone between tokens: noticed without a write
  EXPECT_TRUE(eventually([&] { return fixture.chunks->abandoned.load(); }));
  server.stop();
}

TEST(HttpServer, LimitsAnswerWithTheirStatus) {
  Fixture fixture;
  Server server(
      ServerOptions{.worker_threads = 1, .max_body_bytes = 1000, .max_header_bytes = 2048, .max_target_bytes = 512},
      fixture.routes());
  server.start();
  httplib::Client client("127.0.0.1", server.port());
  EXPECT_EQ(client.Post("/echo", std::string(900, 'a'), "text/plain")->status, 200);
  const auto large = client.Post("/echo", std::string(5000, 'a'), "text/plain");
  ASSERT_TRUE(large);
  EXPECT_EQ(large->status, 413);
  EXPECT_EQ(large->body, "refused 413");
  EXPECT_EQ(client.Get("/echo?" + std::string(1000, 'q'))->status, 414);
  EXPECT_EQ(client.Get("/echo", {{"X-Big", std::string(1800, 'h')}, {"X-Big2", std::string(600, 'h')}})->status, 431);
  // Not HTTP at all.
  const int fd = connect_to(server.port());
  send_all(fd, "HELLO\r\n\r\n");
  EXPECT_NE(read_until(fd, "refused 400").find("400"), std::string::npos);
  ::close(fd);
  EXPECT_EQ(client.Get("/health")->body, "ok");
  server.stop();
}

TEST(HttpServer, ConnectionsPastTheLimitGet503) {
  Fixture fixture;
  Server server(ServerOptions{.worker_threads = 1, .max_connections = 2}, fixture.routes());
  server.start();
  const int a = connect_to(server.port()), b = connect_to(server.port());
  ASSERT_TRUE(eventually([&] { return server.connections() == 2; }));
  httplib::Client third("127.0.0.1", server.port());
  const auto refused = third.Get("/health");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 503);
  ::close(a);
  ::close(b);
  ASSERT_TRUE(eventually([&] { return server.connections() == 0; }));
  EXPECT_EQ(third.Get("/health")->status, 200);
  server.stop();
}

TEST(HttpServer, ThousandsOfOpenConnectionsOnTwoThreads) {
  raise_open_file_limit();
  Fixture fixture;
  Server server(ServerOptions{.io_threads = 2, .worker_threads = 2}, fixture.routes());
  server.start();
  constexpr int kConnections = 3000;
  std::vector<int> fds;
  for (int i = 0; i < kConnections; ++i) {
    const int fd = connect_to(server.port());
    if (fd < 0) break;
    fds.push_back(fd);
  }
  ASSERT_EQ(fds.size(), static_cast<size_t>(kConnections)) << "the test process ran out of descriptors";
  // Every one of them sends a request that waits for the same deferred answer.
  for (int fd : fds) send_all(fd, "GET /deferred HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_TRUE(eventually([&] { return fixture.handled.load() == kConnections; }));
  EXPECT_EQ(server.connections(), kConnections);
  httplib::Client client("127.0.0.1", server.port());
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(client.Get("/health")->body, "ok");
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);
  fixture.deferred->complete("all at once");
  for (int fd : fds) {
    EXPECT_NE(read_until(fd, "all at once").find("all at once"), std::string::npos);
    ::close(fd);
  }
  EXPECT_TRUE(eventually([&] { return server.connections() <= 1; }));
  server.stop();
}

TEST(HttpServer, StopAbandonsPendingAnswersAndFreesThePort) {
  Fixture fixture;
  auto server = std::make_unique<Server>(ServerOptions{.worker_threads = 1}, fixture.routes());
  server->start();
  const int port = server->port();
  const int fd = connect_to(port);
  send_all(fd, "GET /chunks HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_TRUE(eventually([&] { return fixture.chunks->started.load(); }));
  server->stop();
  EXPECT_TRUE(fixture.chunks->abandoned);
  ::close(fd);
  Server again(ServerOptions{.port = port, .worker_threads = 1}, fixture.routes());
  EXPECT_NO_THROW(again.start());
  Server twice(ServerOptions{.port = port, .worker_threads = 1}, fixture.routes());
  try {
    twice.start();
    FAIL() << "a second server bound port " << port;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("address in use"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace rs::http
