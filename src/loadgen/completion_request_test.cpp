#include "loadgen/completion_request.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace rs::loadgen {
namespace {

TEST(CompletionRequest, ParsesBaseUrls) {
  auto url = parse_base_url("http://127.0.0.1:8000");
  ASSERT_TRUE(url);
  EXPECT_EQ(url->host, "127.0.0.1");
  EXPECT_EQ(url->port, 8000);
  EXPECT_EQ(url->path_prefix, "");
  url = parse_base_url("http://example.org/proxy/");
  ASSERT_TRUE(url);
  EXPECT_EQ(url->port, 80);
  EXPECT_EQ(url->path_prefix, "/proxy");
  url = parse_base_url("http://[::1]:9");
  ASSERT_TRUE(url);
  EXPECT_EQ(url->host, "::1");
  EXPECT_EQ(url->port, 9);
  for (const char* bad : {"https://a:1", "a:1", "http://:80", "http://a:0", "http://a:x", "http://[::1"})
    EXPECT_FALSE(parse_base_url(bad)) << bad;
}

TEST(CompletionRequest, StreamsWithUsageIgnoringEos) {
  const BaseUrl url{.host = "localhost", .port = 8000, .path_prefix = "/api"};
  Prompt prompt{.token_ids = {5, 6, 7}, .input_len = 3, .output_len = 9};
  const std::string request = completion_request(url, {.model = "m", .api_key = "k"}, prompt);
  EXPECT_EQ(request.rfind("POST /api/v1/completions HTTP/1.1\r\nHost: localhost:8000\r\n", 0), 0u);
  EXPECT_NE(request.find("\r\nAuthorization: Bearer k\r\n"), std::string::npos);
  const size_t split = request.find("\r\n\r\n");
  const std::string body = request.substr(split + 4);
  EXPECT_NE(request.find("Content-Length: " + std::to_string(body.size()) + "\r\n"), std::string::npos);
  const auto json = nlohmann::json::parse(body);
  EXPECT_EQ(json["prompt"], nlohmann::json({5, 6, 7}));
  EXPECT_EQ(json["max_tokens"], 9);
  EXPECT_EQ(json["stream"], true);
  EXPECT_EQ(json["ignore_eos"], true);
  EXPECT_EQ(json["return_token_ids"], true);
  EXPECT_EQ(json["stream_options"]["include_usage"], true);
  EXPECT_EQ(json["model"], "m");

  prompt = Prompt{.text = "the of and", .input_len = 3, .output_len = 2};
  const std::string text_request = completion_request(url, {}, prompt);
  EXPECT_EQ(text_request.find("Authorization"), std::string::npos);
  const auto text = nlohmann::json::parse(text_request.substr(text_request.find("\r\n\r\n") + 4));
  EXPECT_EQ(text["prompt"], "the of and");
  EXPECT_FALSE(text.contains("model"));
}

}  // namespace
}  // namespace rs::loadgen
