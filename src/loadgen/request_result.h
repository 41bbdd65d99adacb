// RequestResult: what the load generator measured for one streamed completion request, and how it can fail.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace rs::loadgen {

enum class ErrorKind : uint8_t {
  kNone,
  kConnect,       // the TCP connection could not be made
  kHttpStatus,    // the server answered with a status other than 200
  kTimeout,       // no complete answer within the request timeout
  kMalformed,     // bad HTTP framing, an SSE event that is not JSON, no [DONE], or no usage
  kDisconnected,  // the server closed the connection before the answer was complete
  kStreamError,   // the stream carried an error object instead of tokens
};
inline constexpr int kNumErrorKinds = 7;
std::string_view error_kind_name(ErrorKind kind);  // "connect", "http_status", ...

struct RequestResult {
  ErrorKind error = ErrorKind::kNone;
  std::string error_detail;  // first words of what went wrong, for the report
  int http_status = 0;
  double start_s = 0;         // when the request was sent, seconds since the run began
  double ttft_s = -1;         // first chunk with text, seconds after start (-1: none came)
  double latency_s = 0;       // [DONE] (or the failure), seconds after start
  std::vector<double> itl_s;  // gaps between consecutive chunks with text (one per chunk after the first)
  // From the server's usage (never counted by the client); -1 where no usage arrived.
  int64_t prompt_tokens = -1;
  int64_t completion_tokens = -1;
  int64_t cached_tokens = 0;  // usage.prompt_tokens_details.cached_tokens (0 where the server omits it)
  // usage.speculative (radixserve's extension; 0 where the server does not speculate or report it)
  int64_t spec_verify_steps = 0;
  int64_t spec_accepted_tokens = 0;
  int32_t expected_output_tokens = 0;  // max_tokens asked for

  bool ok() const { return error == ErrorKind::kNone; }
};

}  // namespace rs::loadgen
