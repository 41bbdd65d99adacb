// HttpServer start-up: one server per port.
#include "server/http_server.h"

#include <gtest/gtest.h>

#include "base/error.h"

namespace rs::server {
namespace {

TEST(HttpServer, SecondServerOnABoundPortFailsClearly) {
  HttpServer first(ServerConfig{.port = 0, .num_threads = 2});
  first.start();
  ASSERT_GT(first.port(), 0);
  HttpServer second(ServerConfig{.port = first.port(), .num_threads = 2});
  try {
    second.start();
    FAIL() << "a second server bound port " << first.port();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("address in use"), std::string::npos) << e.what();
  }
  first.stop();
  // The port is free again once the first server stops (SO_REUSEADDR: no wait for TIME_WAIT).
  HttpServer third(ServerConfig{.port = first.port(), .num_threads = 2});
  EXPECT_NO_THROW(third.start());
  third.stop();
}

}  // namespace
}  // namespace rs::server
