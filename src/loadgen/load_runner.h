// run_load: the load generator's engine. One thread drives every request over non-blocking sockets (epoll), each an
// HTTP/1.1 call whose streamed answer is parsed as it arrives, keeping connections alive between requests. Closed
// loop (at most C requests in flight; the next starts as one ends) or open loop (each request at its arrival time).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "loadgen/completion_request.h"
#include "loadgen/request_result.h"

namespace rs::loadgen {

struct LoadProgress {
  int64_t total = 0;
  int64_t finished = 0;  // answered or failed
  int64_t errors = 0;
  int64_t in_flight = 0;
  double elapsed_s = 0;
};

struct LoadOptions {
  int32_t concurrency = 0;         // > 0: at most this many requests in flight (with arrivals too: a cap)
  std::vector<double> arrivals_s;  // not empty: request i is sent arrivals_s[i] seconds after the start
  double timeout_s = 600;          // a request not answered in full by then fails as kTimeout
  std::function<void(const LoadProgress&)> on_progress;  // called about once a second, and at the end
};

struct LoadRun {
  std::vector<RequestResult> results;  // one per request, in request order
  double duration_s = 0;               // first send to last answer
  double cpu_s = 0;                    // CPU time (user + system) of the thread that ran the load
  int32_t max_in_flight = 0;
  int64_t connections_opened = 0;
};

// Sends `requests` (complete HTTP/1.1 requests for streamed completions, see completion_request) to `url`.
// Throws rs::Error when the host does not resolve or neither arrivals nor a concurrency is given; every other
// failure is recorded in that request's result. Raises this process's open-file limit to its hard limit.
LoadRun run_load(const BaseUrl& url, const std::vector<std::string>& requests, const LoadOptions& options);

}  // namespace rs::loadgen
