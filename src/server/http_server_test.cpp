// HttpServer start-up: one server per port; limits and routes that answer before the model is ready.
#include "server/http_server.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include "base/error.h"

namespace rs::server {
namespace {

TEST(HttpServer, SecondServerOnABoundPortFailsClearly) {
  HttpServer first(ServerConfig{.port = 0});
  first.start();
  ASSERT_GT(first.port(), 0);
  HttpServer second(ServerConfig{.port = first.port()});
  try {
    second.start();
    FAIL() << "a second server bound port " << first.port();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("address in use"), std::string::npos) << e.what();
  }
  first.stop();
  // The port is free again once the first server stops (SO_REUSEADDR: no wait for TIME_WAIT).
  HttpServer third(ServerConfig{.port = first.port()});
  EXPECT_NO_THROW(third.start());
  third.stop();
}

TEST(HttpServer, OversizedBodyGetsA413ThatNamesTheLimit) {
  HttpServer server(ServerConfig{.port = 0, .max_request_bytes = 2048});
  server.start();
  httplib::Client client("127.0.0.1", server.port());
  const auto small = client.Post("/v1/completions", std::string(100, ' '), "application/json");
  ASSERT_TRUE(small);
  EXPECT_NE(small->status, 413);  // not ready yet, but not too large
  const auto large = client.Post("/v1/completions", std::string(4096, ' '), "application/json");
  ASSERT_TRUE(large);
  EXPECT_EQ(large->status, 413);
  EXPECT_NE(large->body.find("limit of 2048 bytes"), std::string::npos) << large->body;
  EXPECT_EQ(client.Get("/health")->status, 503);  // still serving (loading) after the refusal
  server.stop();
}

// GET /v1/models/ once answered 405 "use GET": it is the model list (503 while loading), and a 405 names a known path
// asked with the wrong method.
TEST(HttpServer, ModelsWithATrailingSlashIsTheModelList) {
  HttpServer server(ServerConfig{.port = 0});
  server.start();
  httplib::Client client("127.0.0.1", server.port());
  EXPECT_EQ(client.Get("/v1/models")->status, 503);
  EXPECT_EQ(client.Get("/v1/models/")->status, 503);
  const auto post = client.Post("/v1/models/", "{}", "application/json");
  ASSERT_TRUE(post);
  EXPECT_EQ(post->status, 405);
  EXPECT_EQ(post->get_header_value("Allow"), "GET");
  server.stop();
}

// Liveness answers while the model loads; readiness (/health) and the gateway routes wait for it.
TEST(HttpServer, LiveAnswersWhileLoadingAndGatewayRoutesWait) {
  HttpServer server(ServerConfig{.port = 0});
  server.start();
  httplib::Client client("127.0.0.1", server.port());
  EXPECT_EQ(client.Get("/live")->status, 200);
  EXPECT_EQ(client.Get("/health")->status, 503);
  for (const char* route : {"/get_model_info", "/get_server_info", "/server_info", "/get_load", "/health_generate"})
    EXPECT_EQ(client.Get(route)->status, 503) << route;
  EXPECT_EQ(client.Post("/get_load", "{}", "application/json")->status, 405);
  server.stop();
}

TEST(HttpServer, ChatPageIsPublicHtmlUnlessTurnedOff) {
  HttpServer server(ServerConfig{.port = 0, .api_key = "sk-test"});
  server.start();
  httplib::Client client("127.0.0.1", server.port());
  const auto page = client.Get("/");  // no Authorization: the page is public, its API calls carry the key
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_EQ(page->get_header_value("Content-Type"), "text/html; charset=utf-8");
  EXPECT_EQ(page->body.rfind("<!doctype html>", 0), 0u);
  EXPECT_NE(page->body.find("/chat/completions"), std::string::npos);
  EXPECT_EQ(client.Get("/v1/models")->status, 401);
  server.stop();

  HttpServer no_page(ServerConfig{.port = 0, .web_ui = false});
  no_page.start();
  httplib::Client other("127.0.0.1", no_page.port());
  EXPECT_EQ(other.Get("/")->status, 404);
  no_page.stop();
}

TEST(HttpServer, MetricsOnTheirOwnPortLeaveTheApiPort) {
  HttpServer server(ServerConfig{.port = 0, .metrics_port = 0});
  server.start();
  ASSERT_GT(server.metrics_port(), 0);
  ASSERT_NE(server.metrics_port(), server.port());
  httplib::Client api("127.0.0.1", server.port()), observe("127.0.0.1", server.metrics_port());
  const auto metrics = observe.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 200);
  EXPECT_NE(metrics->body.find("# TYPE"), std::string::npos) << metrics->body;
  EXPECT_EQ(observe.Get("/health")->status, 503);  // loading, on both ports
  EXPECT_EQ(api.Get("/health")->status, 503);
  EXPECT_EQ(api.Get("/metrics")->status, 404);
  EXPECT_EQ(observe.Post("/v1/completions", "{}", "application/json")->status, 404);  // only observability there
  server.stop();

  // A metrics port that is taken fails the start clearly, like the API port.
  HttpServer taken(ServerConfig{.port = 0, .metrics_port = server.port()});
  HttpServer holder(ServerConfig{.port = server.port()});
  holder.start();
  try {
    taken.start();
    FAIL() << "the metrics port " << server.port() << " was bound twice";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("address in use"), std::string::npos) << e.what();
  }
  holder.stop();
}

TEST(HttpServer, ProtectedMetricsNeedTheKeyOnEitherPortAndHealthStaysOpen) {
  for (const int metrics_port : {-1, 0}) {
    HttpServer server(
        ServerConfig{.port = 0, .api_key = "sk-test", .metrics_port = metrics_port, .protect_metrics = true});
    server.start();
    httplib::Client client("127.0.0.1", metrics_port < 0 ? server.port() : server.metrics_port());
    EXPECT_EQ(client.Get("/metrics")->status, 401) << "metrics port " << metrics_port;
    EXPECT_EQ(client.Get("/health")->status, 503);  // loading; probes carry no key
    const httplib::Headers key = {{"Authorization", "Bearer sk-test"}};
    EXPECT_EQ(client.Get("/metrics", key)->status, 200);
    EXPECT_EQ(client.Get("/health", key)->status, 503);
    server.stop();
  }
  // Without protect_metrics they stay public beside a key.
  HttpServer open_server(ServerConfig{.port = 0, .api_key = "sk-test"});
  open_server.start();
  httplib::Client client("127.0.0.1", open_server.port());
  EXPECT_EQ(client.Get("/metrics")->status, 200);
  open_server.stop();
}

}  // namespace
}  // namespace rs::server
