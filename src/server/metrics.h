// ServerMetrics: request latency histograms and counters, rendered with the scheduler's stats in Prometheus text
// format.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "sched/scheduler.h"

namespace rs::server {

// A Prometheus histogram (cumulative buckets, sum, count). Thread-safe.
class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double value);
  // Appends `name`'s bucket, sum and count lines; `labels` (e.g. model_name="m") go on each.
  void render(const std::string& name, const std::string& help, std::string& out, const std::string& labels = {}) const;
  uint64_t count() const;

 private:
  std::vector<double> bounds_;
  mutable std::mutex mutex_;
  std::vector<uint64_t> counts_;  // [bounds + 1], the last is +Inf; not cumulative
  double sum_ = 0;
  uint64_t count_ = 0;
};

// Appends one series with its HELP and TYPE lines: `name{labels} value` (labels already formatted as k="v",...; none
// when empty).
void append_series(std::string& out, const std::string& name, const char* type, const std::string& help,
                   const std::string& labels, double value);

// What the KV cache event publisher has done (batches of a step's events each).
struct KvEventCounts {
  uint64_t published = 0;
  uint64_t dropped = 0;  // found the publisher's queue full
};

class ServerMetrics {
 public:
  ServerMetrics();

  Histogram time_to_first_token;         // seconds from arrival to a choice's first token
  Histogram inter_token_latency;         // seconds between consecutive tokens of a choice
  Histogram request_latency;             // seconds from arrival to the last token of an API call
  Histogram queue_time;                  // seconds from arrival to a choice's first admission into a batch
  std::atomic<uint64_t> requests_ok{0};  // API calls answered successfully
  std::atomic<uint64_t> requests_client_error{0};
  std::atomic<uint64_t> requests_server_error{0};
  std::atomic<uint64_t> requests_aborted{0};   // streams whose client went away
  std::atomic<uint64_t> requests_rejected{0};  // refused with 503 (queue full, draining), counted only here
  std::atomic<int64_t> http_connections{0};    // open client connections on the API port (set before render)

  // A 4xx answer, also counted by status.
  void count_client_error(int status);
  // Prometheus text exposition (version 0.0.4) of these metrics and `stats`; every series carries
  // model_name="<model_name>" when it is not empty (as vLLM's).
  std::string render(const sched::SchedulerStats& stats, int32_t page_size, const std::string& model_name = {},
                     const KvEventCounts* kv_events = nullptr) const;

 private:
  mutable std::mutex client_errors_mutex_;
  std::map<int, uint64_t> client_errors_;  // by HTTP status
};

}  // namespace rs::server
