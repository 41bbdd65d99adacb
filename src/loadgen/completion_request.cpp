#include "loadgen/completion_request.h"

#include <charconv>
#include <nlohmann/json.hpp>

namespace rs::loadgen {

std::optional<BaseUrl> parse_base_url(const std::string& url) {
  constexpr std::string_view kScheme = "http://";
  if (url.compare(0, kScheme.size(), kScheme) != 0) return std::nullopt;
  std::string_view rest = std::string_view(url).substr(kScheme.size());
  BaseUrl base;
  const size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  if (slash != std::string_view::npos) base.path_prefix = std::string(rest.substr(slash));
  while (!base.path_prefix.empty() && base.path_prefix.back() == '/') base.path_prefix.pop_back();
  std::string_view port;
  if (!authority.empty() && authority.front() == '[') {  // [::1]:8000
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    base.host = std::string(authority.substr(1, close - 1));
    authority.remove_prefix(close + 1);
    if (!authority.empty() && authority.front() != ':') return std::nullopt;
    if (!authority.empty()) port = authority.substr(1);
  } else {
    const size_t colon = authority.find(':');
    base.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) port = authority.substr(colon + 1);
  }
  if (base.host.empty()) return std::nullopt;
  if (!port.empty()) {
    unsigned value = 0;
    const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (ec != std::errc() || end != port.data() + port.size() || value == 0 || value > 65535) return std::nullopt;
    base.port = static_cast<uint16_t>(value);
  }
  return base;
}

std::string completion_request(const BaseUrl& url, const RequestOptions& options, const Prompt& prompt) {
  nlohmann::json body = {{"max_tokens", prompt.output_len},
                         {"temperature", 0.0},
                         {"ignore_eos", true},
                         {"return_token_ids", true},  // tokens are timed even when they decode to no text
                         {"stream", true},
                         {"stream_options", {{"include_usage", true}}}};
  if (!options.model.empty()) body["model"] = options.model;
  if (prompt.token_ids.empty())
    body["prompt"] = prompt.text;
  else
    body["prompt"] = prompt.token_ids;
  const std::string json = body.dump();
  const bool ipv6 = url.host.find(':') != std::string::npos;
  std::string request =
      "POST " + url.path_prefix + "/v1/completions HTTP/1.1\r\nHost: " + (ipv6 ? "[" + url.host + "]" : url.host) +
      ":" + std::to_string(url.port) + "\r\nContent-Type: application/json\r\nAccept: text/event-stream\r\n";
  if (!options.api_key.empty()) request += "Authorization: Bearer " + options.api_key + "\r\n";
  request += "Content-Length: " + std::to_string(json.size()) + "\r\n\r\n" + json;
  return request;
}

}  // namespace rs::loadgen
