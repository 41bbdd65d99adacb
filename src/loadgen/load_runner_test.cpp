// run_load against an in-process cpp-httplib server that streams canned SSE answers (chunked, keep-alive), refuses,
// cuts streams short, stalls, or sends garbage, selected by the base URL's path prefix.
#include "loadgen/load_runner.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <nlohmann/json.hpp>
#include <thread>

namespace rs::loadgen {
namespace {

class FakeServer {
 public:
  FakeServer() {
    server_.Post("/ok/v1/completions",
                 [this](const httplib::Request& req, httplib::Response& res) { stream(req, res); });
    server_.Post("/busy/v1/completions", [](const httplib::Request&, httplib::Response& res) {
      res.status = 503;
      res.set_content(R"({"error":{"message":"queue full"}})", "application/json");
    });
    server_.Post("/cut/v1/completions", [](const httplib::Request&, httplib::Response& res) {
      res.set_chunked_content_provider("text/event-stream", [](size_t, httplib::DataSink& sink) {
        const std::string event = "data: {\"choices\":[{\"text\":\"x\"}]}\n\n";
        sink.write(event.data(), event.size());
        return false;  // abandons the answer: the connection closes without the last chunk
      });
    });
    server_.Post("/garbage/v1/completions", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("data: not json\n\ndata: [DONE]\n\n", "text/event-stream");
    });
    server_.Post("/stall/v1/completions", [](const httplib::Request&, httplib::Response& res) {
      std::this_thread::sleep_for(std::chrono::milliseconds(400));
      res.set_content("data: [DONE]\n\n", "text/event-stream");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~FakeServer() {
    server_.stop();
    thread_.join();
  }
  BaseUrl url(const std::string& prefix) const {
    return BaseUrl{.host = "127.0.0.1", .port = static_cast<uint16_t>(port_), .path_prefix = prefix};
  }
  int max_concurrent() const { return max_concurrent_; }

 private:
  // max_tokens chunks of one token each, 2 ms apart, then the usage chunk and [DONE]; usage counts what was asked.
  void stream(const httplib::Request& req, httplib::Response& res) {
    const auto body = nlohmann::json::parse(req.body);
    const int tokens = body.at("max_tokens");
    const int prompt = static_cast<int>(body.at("prompt").size());
    res.set_chunked_content_provider("text/event-stream", [this, tokens, prompt](size_t, httplib::DataSink& sink) {
      const int now = ++concurrent_;
      for (int seen = max_concurrent_; now > seen && !max_concurrent_.compare_exchange_weak(seen, now);) {
      }
      for (int i = 0; i < tokens; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        const std::string event = "data: {\"choices\":[{\"index\":0,\"text\":\"t" + std::to_string(i) + "\"}]}\n\n";
        sink.write(event.data(), event.size());
      }
      const std::string usage = "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":" + std::to_string(prompt) +
                                ",\"completion_tokens\":" + std::to_string(tokens) +
                                ",\"prompt_tokens_details\":{\"cached_tokens\":4}}}\n\ndata: [DONE]\n\n";
      sink.write(usage.data(), usage.size());
      --concurrent_;
      sink.done();
      return true;
    });
  }

  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::atomic<int> concurrent_{0}, max_concurrent_{0};
};

std::vector<std::string> requests_for(const BaseUrl& url, int count, int output_len) {
  std::vector<std::string> requests;
  for (int i = 0; i < count; ++i) {
    const Prompt prompt{.token_ids = std::vector<int32_t>(10 + i, 1), .input_len = 10 + i, .output_len = output_len};
    requests.push_back(completion_request(url, {}, prompt));
  }
  return requests;
}

TEST(LoadRunner, ClosedLoopKeepsConcurrencyAndReusesConnections) {
  FakeServer server;
  const BaseUrl url = server.url("/ok");
  int progress_calls = 0;
  const LoadRun run = run_load(url, requests_for(url, 16, 5),
                               {.concurrency = 4, .on_progress = [&](const LoadProgress&) { ++progress_calls; }});
  ASSERT_EQ(run.results.size(), 16u);
  for (size_t i = 0; i < run.results.size(); ++i) {
    const RequestResult& r = run.results[i];
    EXPECT_TRUE(r.ok()) << error_kind_name(r.error) << ": " << r.error_detail;
    EXPECT_EQ(r.http_status, 200);
    EXPECT_EQ(r.prompt_tokens, static_cast<int64_t>(10 + i));
    EXPECT_EQ(r.completion_tokens, 5);
    EXPECT_EQ(r.cached_tokens, 4);
    EXPECT_GT(r.ttft_s, 0.0);
    EXPECT_EQ(r.itl_s.size(), 4u);
    EXPECT_GE(r.latency_s, r.ttft_s);
  }
  EXPECT_EQ(run.max_in_flight, 4);
  EXPECT_LE(server.max_concurrent(), 4);
  EXPECT_LT(run.connections_opened, 16);  // keep-alive: connections carry several requests
  EXPECT_GT(run.duration_s, 0.0);
  EXPECT_GE(progress_calls, 1);
}

TEST(LoadRunner, OpenLoopSendsAtTheArrivalTimes) {
  FakeServer server;
  const BaseUrl url = server.url("/ok");
  const std::vector<double> arrivals = {0.0, 0.05, 0.10, 0.30};
  const LoadRun run = run_load(url, requests_for(url, 4, 2), {.arrivals_s = arrivals});
  for (size_t i = 0; i < arrivals.size(); ++i) {
    EXPECT_TRUE(run.results[i].ok()) << run.results[i].error_detail;
    EXPECT_GE(run.results[i].start_s, arrivals[i]);
    EXPECT_LT(run.results[i].start_s, arrivals[i] + 0.04);
  }
}

TEST(LoadRunner, FailuresAreRecordedByKind) {
  FakeServer server;
  const auto kind_of = [&](const std::string& prefix, double timeout_s = 10) {
    const BaseUrl url = server.url(prefix);
    const LoadRun run = run_load(url, requests_for(url, 2, 3), {.concurrency = 2, .timeout_s = timeout_s});
    EXPECT_EQ(run.results[0].error, run.results[1].error) << prefix;
    return run.results[0];
  };
  const RequestResult busy = kind_of("/busy");
  EXPECT_EQ(busy.error, ErrorKind::kHttpStatus);
  EXPECT_EQ(busy.http_status, 503);
  EXPECT_NE(busy.error_detail.find("queue full"), std::string::npos);
  EXPECT_EQ(kind_of("/cut").error, ErrorKind::kDisconnected);
  EXPECT_EQ(kind_of("/garbage").error, ErrorKind::kMalformed);
  EXPECT_EQ(kind_of("/stall", 0.1).error, ErrorKind::kTimeout);
  EXPECT_EQ(kind_of("/missing").error, ErrorKind::kHttpStatus);  // 404
}

TEST(LoadRunner, RefusedConnectionsAreConnectErrors) {
  // A port bound but not listening: connections to it are refused.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length), 0);
  const BaseUrl url{.host = "127.0.0.1", .port = ntohs(address.sin_port)};
  const LoadRun run = run_load(url, requests_for(url, 3, 1), {.concurrency = 3, .timeout_s = 10});
  ::close(fd);
  for (const RequestResult& r : run.results) EXPECT_EQ(r.error, ErrorKind::kConnect) << r.error_detail;
}

}  // namespace
}  // namespace rs::loadgen
