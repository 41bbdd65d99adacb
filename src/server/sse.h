// Server-sent events framing for streamed completions (OpenAI style: `data: {json}\n\n`, ending with `data: [DONE]`;
// named events for the Messages and Responses APIs).
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace rs::server {

inline std::string sse_data(const nlohmann::json& payload) {
  return "data: " + payload.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n\n";
}

// A named event (`event: NAME\ndata: {json}\n\n`), as Anthropic's Messages and OpenAI's Responses streams send them.
inline std::string sse_event(std::string_view name, const nlohmann::json& payload) {
  return "event: " + std::string(name) + "\n" + sse_data(payload);
}

inline constexpr const char* kSseDone = "data: [DONE]\n\n";
// A comment line: clients ignore it; writing it while a request waits reveals a client that went away.
inline constexpr const char* kSseKeepAlive = ": keep-alive\n\n";

}  // namespace rs::server
