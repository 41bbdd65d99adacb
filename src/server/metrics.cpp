#include "server/metrics.h"

#include <fmt/format.h>

#include <algorithm>

#include "server/router_metrics.h"

namespace rs::server {
namespace {

std::vector<double> latency_buckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0};
}

void header(std::string& out, const std::string& name, const char* type, const std::string& help) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

// "{a,b}" from label pairs already formatted as key="value" (empty ones skipped); "" when there are none.
std::string braces(std::initializer_list<std::string> parts) {
  std::string inside;
  for (const std::string& part : parts)
    if (!part.empty()) inside += (inside.empty() ? "" : ",") + part;
  return inside.empty() ? "" : "{" + inside + "}";
}

void single(std::string& out, const std::string& name, const char* type, const std::string& help, double value,
            const std::string& model) {
  append_series(out, name, type, help, model, value);
}

}  // namespace

void append_series(std::string& out, const std::string& name, const char* type, const std::string& help,
                   const std::string& labels, double value) {
  header(out, name, type, help);
  out += fmt::format("{}{} {}\n", name, braces({labels}), value);
}

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

void Histogram::render(const std::string& name, const std::string& help, std::string& out,
                       const std::string& labels) const {
  header(out, name, "histogram", help);
  std::lock_guard lock(mutex_);
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    out += fmt::format("{}_bucket{} {}\n", name, braces({labels, fmt::format("le=\"{}\"", bounds_[i])}), cumulative);
  }
  out += fmt::format("{}_bucket{} {}\n{}_sum{} {}\n{}_count{} {}\n", name, braces({labels, "le=\"+Inf\""}), count_,
                     name, braces({labels}), sum_, name, braces({labels}), count_);
}

void ServerMetrics::count_client_error(int status) {
  requests_client_error++;
  std::lock_guard lock(client_errors_mutex_);
  ++client_errors_[status];
}

ServerMetrics::ServerMetrics()
    : time_to_first_token(latency_buckets()),
      inter_token_latency(latency_buckets()),
      request_latency(latency_buckets()),
      queue_time(latency_buckets()) {}

std::string ServerMetrics::render(const sched::SchedulerStats& stats, int32_t page_size, const std::string& model_name,
                                  const KvEventCounts* kv_events) const {
  std::string out;
  const std::string model = model_name.empty() ? "" : fmt::format("model_name=\"{}\"", model_name);
  single(out, "radixserve_num_requests_running", "gauge", "Sequences in the running batch.", stats.num_running, model);
  single(out, "radixserve_num_requests_waiting", "gauge", "Sequences waiting for admission (preempted included).",
         stats.num_queued, model);
  single(out, "radixserve_kv_page_size_tokens", "gauge", "Tokens per KV page.", page_size, model);
  struct PageMetric {
    const char* name;
    const char* help;
    int64_t (*value)(const memory::KvGroupStats&);
  };
  const PageMetric page_metrics[] = {
      {"radixserve_kv_pages_capacity", "KV pages in the pool, per KV group.",
       [](const memory::KvGroupStats& g) { return g.num_pages; }},
      {"radixserve_kv_pages_used", "KV pages referenced by requests or the prefix cache.",
       [](const memory::KvGroupStats& g) { return g.used_pages; }},
      {"radixserve_kv_pages_free", "KV pages on the free list.",
       [](const memory::KvGroupStats& g) { return g.num_pages - g.used_pages; }},
      {"radixserve_kv_pages_cached", "KV pages held by the radix prefix cache.",
       [](const memory::KvGroupStats& g) { return g.cached_pages; }},
  };
  for (const PageMetric& metric : page_metrics) {
    header(out, metric.name, "gauge", metric.help);
    for (size_t g = 0; g < stats.kv.size(); ++g)
      out += fmt::format("{}{} {}\n", metric.name,
                         braces({model, fmt::format("group=\"{}\",window=\"{}\"", g, stats.kv[g].window)}),
                         metric.value(stats.kv[g]));
  }
  single(out, "radixserve_prefix_cache_hit_rate", "gauge",
         "Prompt tokens served from the prefix cache / prompt tokens.", summarize_load(stats).cache_hit_rate, model);
  single(out, "radixserve_prompt_tokens_total", "counter", "Prompt tokens of admitted requests.",
         static_cast<double>(stats.prompt_tokens), model);
  single(out, "radixserve_cached_prompt_tokens_total", "counter", "Prompt tokens reused from the prefix cache.",
         static_cast<double>(stats.cached_prompt_tokens), model);
  single(out, "radixserve_generation_tokens_total", "counter", "Generated tokens.",
         static_cast<double>(stats.generation_tokens), model);
  single(out, "radixserve_preemptions_total", "counter", "Running requests retracted for lack of KV and recomputed.",
         static_cast<double>(stats.preemptions), model);
  single(out, "radixserve_scheduler_steps_total", "counter", "Engine steps run.", static_cast<double>(stats.steps),
         model);
  single(out, "radixserve_scheduler_step_seconds_total", "counter",
         "Wall time of engine steps: scheduling, the forward pass, committing and streaming tokens.",
         stats.step_seconds, model);
  single(out, "radixserve_scheduler_forward_seconds_total", "counter",
         "Of radixserve_scheduler_step_seconds_total, the time inside the forward pass (device step and its staging); "
         "the rest is the scheduler's own host time.",
         stats.forward_seconds, model);
  single(out, "radixserve_state_slots_used", "gauge",
         "Hybrid models: recurrent-state slots held by running requests and prefix-cache snapshots.",
         static_cast<double>(stats.state_slots_used), model);
  single(out, "radixserve_state_snapshots", "gauge",
         "Hybrid models: recurrent-state snapshots the prefix cache holds (prompts resume after the deepest shared).",
         static_cast<double>(stats.state_snapshots), model);
  single(out, "radixserve_spec_verifies_total", "counter",
         "Speculative decoding: sequence passes that verified a draft.", static_cast<double>(stats.spec_verifies),
         model);
  single(out, "radixserve_spec_draft_tokens_total", "counter", "Speculative decoding: draft tokens verified.",
         static_cast<double>(stats.spec_draft_tokens), model);
  single(out, "radixserve_spec_accepted_tokens_total", "counter", "Speculative decoding: draft tokens accepted.",
         static_cast<double>(stats.spec_accepted_tokens), model);
  single(out, "radixserve_spec_accept_length", "gauge",
         "Speculative decoding: mean tokens a verify pass produced (accepted drafts + 1) since start.",
         stats.spec_verifies ? 1.0 + static_cast<double>(stats.spec_accepted_tokens) / stats.spec_verifies : 0.0,
         model);
  single(out, "radixserve_spec_draft_calls_total", "counter",
         "Speculative decoding: drafter proposals (one per step that drafted, all its sequences together).",
         static_cast<double>(stats.spec_draft_calls), model);
  single(out, "radixserve_spec_draft_seconds_total", "counter",
         "Speculative decoding: wall time inside the drafter's proposals (a drafting model's forwards included).",
         stats.spec_draft_seconds, model);
  single(out, "radixserve_spec_verify_steps_total", "counter", "Speculative decoding: steps that verified drafts.",
         static_cast<double>(stats.spec_verify_steps), model);
  single(out, "radixserve_spec_verify_step_seconds_total", "counter",
         "Speculative decoding: forward time of the steps that verified drafts.", stats.spec_verify_step_seconds,
         model);
  single(out, "radixserve_http_connections", "gauge", "Open client connections on the API port.",
         static_cast<double>(http_connections.load()), model);
  header(out, "radixserve_requests_total", "counter", "API calls by outcome (each call counted once).");
  const std::pair<const char*, uint64_t> outcomes[] = {{"ok", requests_ok.load()},
                                                       {"client_error", requests_client_error.load()},
                                                       {"server_error", requests_server_error.load()},
                                                       {"aborted", requests_aborted.load()},
                                                       {"rejected", requests_rejected.load()}};
  for (const auto& [outcome, count] : outcomes)
    out +=
        fmt::format("radixserve_requests_total{} {}\n", braces({model, fmt::format("outcome=\"{}\"", outcome)}), count);
  header(out, "radixserve_client_errors_total", "counter", "API calls answered with a 4xx, by status.");
  {
    std::lock_guard lock(client_errors_mutex_);
    for (const auto& [status, count] : client_errors_)
      out += fmt::format("radixserve_client_errors_total{} {}\n", braces({model, fmt::format("status=\"{}\"", status)}),
                         count);
  }
  time_to_first_token.render("radixserve_time_to_first_token_seconds", "Time from arrival to the first token.", out,
                             model);
  inter_token_latency.render("radixserve_inter_token_latency_seconds", "Time between consecutive tokens.", out, model);
  request_latency.render("radixserve_e2e_request_latency_seconds", "Time from arrival to the last token.", out, model);
  queue_time.render("radixserve_request_queue_time_seconds", "Time from arrival to the first admission into a batch.",
                    out, model);
  if (kv_events) {
    single(out, "radixserve_kv_events_published_total", "counter",
           "KV cache event batches published (one per scheduler step that changed the prefix cache).",
           kv_events->published, model);
    single(out, "radixserve_kv_events_dropped_total", "counter",
           "KV cache event batches dropped because the publisher's queue was full.", kv_events->dropped, model);
  }
  render_router_metrics(stats, model, out);  // the same load under the names vLLM's and SGLang's routers read
  render_process_metrics(out);
  return out;
}

}  // namespace rs::server
