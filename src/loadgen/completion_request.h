// The HTTP side of one benchmark request: the server's base URL, and the bytes of a streamed OpenAI
// /v1/completions call (stream, stream_options.include_usage, ignore_eos, max_tokens) for one prompt.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "loadgen/workload.h"

namespace rs::loadgen {

struct BaseUrl {
  std::string host;  // name or address, as given
  uint16_t port = 80;
  std::string path_prefix;  // before /v1/completions, without a trailing '/' (often empty)
};

// Parses "http://HOST[:PORT][/PREFIX]" (IPv6 hosts in brackets); nullopt for anything else (https included).
std::optional<BaseUrl> parse_base_url(const std::string& url);

struct RequestOptions {
  std::string model;    // the "model" field; empty: omitted (radixserve then uses its served model)
  std::string api_key;  // "Authorization: Bearer KEY" when not empty
};

// The full HTTP/1.1 request (headers and JSON body) for `prompt`, greedy, ignoring EOS so that it produces
// prompt.output_len tokens.
std::string completion_request(const BaseUrl& url, const RequestOptions& options, const Prompt& prompt);

}  // namespace rs::loadgen
