#include "server/metrics.h"

#include <fmt/format.h>

#include <algorithm>

namespace rs::server {
namespace {

std::vector<double> latency_buckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0};
}

void header(std::string& out, const std::string& name, const char* type, const std::string& help) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

void single(std::string& out, const std::string& name, const char* type, const std::string& help, double value) {
  header(out, name, type, help);
  out += fmt::format("{} {}\n", name, value);
}

}  // namespace

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  const size_t bucket = std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  std::lock_guard lock(mutex_);
  ++counts_[bucket];
  sum_ += value;
  ++count_;
}

uint64_t Histogram::count() const {
  std::lock_guard lock(mutex_);
  return count_;
}

void Histogram::render(const std::string& name, const std::string& help, std::string& out) const {
  header(out, name, "histogram", help);
  std::lock_guard lock(mutex_);
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, bounds_[i], cumulative);
  }
  out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n{}_sum {}\n{}_count {}\n", name, count_, name, sum_, name, count_);
}

ServerMetrics::ServerMetrics()
    : time_to_first_token(latency_buckets()),
      inter_token_latency(latency_buckets()),
      request_latency(latency_buckets()) {}

std::string ServerMetrics::render(const sched::SchedulerStats& stats, int32_t page_size) const {
  std::string out;
  single(out, "radixserve_num_requests_running", "gauge", "Sequences in the running batch.", stats.num_running);
  single(out, "radixserve_num_requests_waiting", "gauge", "Sequences waiting for admission (preempted included).",
         stats.num_queued);
  single(out, "radixserve_kv_page_size_tokens", "gauge", "Tokens per KV page.", page_size);
  struct PageMetric {
    const char* name;
    const char* help;
    int64_t (*value)(const sched::KvGroupStats&);
  };
  const PageMetric page_metrics[] = {
      {"radixserve_kv_pages_total", "KV pages in the pool, per KV group.",
       [](const sched::KvGroupStats& g) { return g.num_pages; }},
      {"radixserve_kv_pages_used", "KV pages referenced by requests or the prefix cache.",
       [](const sched::KvGroupStats& g) { return g.used_pages; }},
      {"radixserve_kv_pages_free", "KV pages on the free list.",
       [](const sched::KvGroupStats& g) { return g.num_pages - g.used_pages; }},
      {"radixserve_kv_pages_cached", "KV pages held by the radix prefix cache.",
       [](const sched::KvGroupStats& g) { return g.cached_pages; }},
  };
  for (const PageMetric& metric : page_metrics) {
    header(out, metric.name, "gauge", metric.help);
    for (size_t g = 0; g < stats.kv.size(); ++g)
      out += fmt::format("{}{{group=\"{}\",window=\"{}\"}} {}\n", metric.name, g, stats.kv[g].window,
                         metric.value(stats.kv[g]));
  }
  const double hit_rate =
      stats.prompt_tokens ? static_cast<double>(stats.cached_prompt_tokens) / static_cast<double>(stats.prompt_tokens)
                          : 0.0;
  single(out, "radixserve_prefix_cache_hit_rate", "gauge",
         "Prompt tokens served from the prefix cache / prompt tokens.", hit_rate);
  single(out, "radixserve_prompt_tokens_total", "counter", "Prompt tokens of admitted requests.",
         static_cast<double>(stats.prompt_tokens));
  single(out, "radixserve_cached_prompt_tokens_total", "counter", "Prompt tokens reused from the prefix cache.",
         static_cast<double>(stats.cached_prompt_tokens));
  single(out, "radixserve_generation_tokens_total", "counter", "Generated tokens.",
         static_cast<double>(stats.generation_tokens));
  single(out, "radixserve_preemptions_total", "counter", "Running requests retracted for lack of KV and recomputed.",
         static_cast<double>(stats.preemptions));
  single(out, "radixserve_scheduler_steps_total", "counter", "Engine steps run.", static_cast<double>(stats.steps));
  header(out, "radixserve_requests_total", "counter", "API calls by outcome.");
  out += fmt::format("radixserve_requests_total{{outcome=\"ok\"}} {}\n", requests_ok.load());
  out += fmt::format("radixserve_requests_total{{outcome=\"client_error\"}} {}\n", requests_client_error.load());
  out += fmt::format("radixserve_requests_total{{outcome=\"server_error\"}} {}\n", requests_server_error.load());
  out += fmt::format("radixserve_requests_total{{outcome=\"aborted\"}} {}\n", requests_aborted.load());
  out += fmt::format("radixserve_requests_total{{outcome=\"rejected\"}} {}\n", requests_rejected.load());
  time_to_first_token.render("radixserve_time_to_first_token_seconds", "Time from arrival to the first token.", out);
  inter_token_latency.render("radixserve_inter_token_latency_seconds", "Time between consecutive tokens.", out);
  request_latency.render("radixserve_e2e_request_latency_seconds", "Time from arrival to the last token.", out);
  return out;
}

}  // namespace rs::server
