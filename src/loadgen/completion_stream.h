// CompletionStream: reads the SSE events of one streamed OpenAI /v1/completions answer into a RequestResult: chunk
// arrival times (TTFT, inter-token gaps), the final usage, [DONE], and in-stream errors.
#pragma once

#include <string_view>

#include "loadgen/request_result.h"

namespace rs::loadgen {

class CompletionStream {
 public:
  // One event's data received at `now_s` (seconds since the run began; result.start_s is the request's start).
  // Marks the result malformed or failed on bad or error events; later events are then ignored.
  void on_event(std::string_view data, double now_s, RequestResult& result);
  // The HTTP body ended at `now_s`: the result fails unless [DONE] and the usage arrived.
  void on_end(double now_s, RequestResult& result);
  bool saw_done() const { return done_; }

 private:
  bool done_ = false;
  bool failed_ = false;
  double last_chunk_s_ = -1;
};

}  // namespace rs::loadgen
