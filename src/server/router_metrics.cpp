#include "server/router_metrics.h"

#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "server/metrics.h"

namespace rs::server {
LoadSummary summarize_load(const sched::SchedulerStats& stats) {
  LoadSummary load;
  load.running = stats.num_running;
  load.waiting = stats.num_queued;
  bool any_full = false;
  for (const memory::KvGroupStats& group : stats.kv) any_full = any_full || group.window == 0;
  for (const memory::KvGroupStats& group : stats.kv) {
    if (any_full && group.window != 0) continue;
    load.total_pages += group.num_pages;
    load.request_pages += group.used_pages - group.evictable_pages;
    load.cached_pages += group.cached_pages;
  }
  load.token_usage = load.total_pages > 0 ? static_cast<double>(load.request_pages) / load.total_pages : 0.0;
  load.cache_hit_rate = stats.prompt_tokens > 0
                            ? static_cast<double>(stats.cached_prompt_tokens) / static_cast<double>(stats.prompt_tokens)
                            : 0.0;
  return load;
}

void render_router_metrics(const sched::SchedulerStats& stats, const std::string& model_label, std::string& out) {
  const LoadSummary load = summarize_load(stats);
  const std::string& m = model_label;
  append_series(out, "vllm:num_requests_running", "gauge", "Number of requests in model execution batches.", m,
                load.running);
  append_series(out, "vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.", m,
                load.waiting);
  append_series(out, "vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.", m,
                load.token_usage);
  append_series(out, "vllm:gpu_cache_usage_perc", "gauge",
                "KV-cache usage (the older name). 1 means 100 percent usage.", m, load.token_usage);
  append_series(out, "vllm:prefix_cache_queries_total", "counter", "Prefix cache queries, in prompt tokens.", m,
                static_cast<double>(stats.prompt_tokens));
  append_series(out, "vllm:prefix_cache_hits_total", "counter", "Prefix cache hits, in prompt tokens.", m,
                static_cast<double>(stats.cached_prompt_tokens));
  append_series(out, "vllm:num_preemptions_total", "counter", "Cumulative number of preemptions.", m,
                static_cast<double>(stats.preemptions));
  append_series(out, "vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.", m,
                static_cast<double>(stats.prompt_tokens));
  append_series(out, "vllm:generation_tokens_total", "counter", "Number of generation tokens processed.", m,
                static_cast<double>(stats.generation_tokens));
  // vLLM's LoRA info gauge: the adapters running and waiting (none here), valued with the time it was taken.
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  append_series(out, "vllm:lora_requests_info", "gauge", "Running stats on lora requests.",
                (m.empty() ? "" : m + ",") + "max_lora=\"0\",running_lora_adapters=\"\",waiting_lora_adapters=\"\"",
                now);
  append_series(out, "sglang:num_running_reqs", "gauge", "The number of running requests.", m, load.running);
  append_series(out, "sglang:num_queue_reqs", "gauge", "The number of requests in the waiting queue.", m, load.waiting);
  append_series(out, "sglang:token_usage", "gauge", "The token usage.", m, load.token_usage);
  append_series(out, "sglang:cache_hit_rate", "gauge", "The prefix cache hit rate.", m, load.cache_hit_rate);
  append_series(
      out, "radixserve_kv_pages_requests", "gauge",
      "Full-attention KV pages held by running requests (the rest of the used pages only the prefix cache keeps).", m,
      static_cast<double>(load.request_pages));
}

void render_process_metrics(std::string& out) {
  std::ifstream stat_file("/proc/self/stat");
  std::string stat((std::istreambuf_iterator<char>(stat_file)), std::istreambuf_iterator<char>());
  const size_t after_name = stat.rfind(')');  // the command name may hold spaces and parentheses
  if (after_name == std::string::npos) return;
  std::istringstream fields(stat.substr(after_name + 2));
  std::vector<std::string> f((std::istream_iterator<std::string>(fields)), std::istream_iterator<std::string>());
  // Fields from the state (field 3 of proc(5)) on: utime 14, stime 15, starttime 22, vsize 23, rss 24.
  const auto field = [&f](size_t number) { return number - 3 < f.size() ? std::stod(f[number - 3]) : 0.0; };
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double page_bytes = static_cast<double>(sysconf(_SC_PAGESIZE));
  double boot_time = 0;
  std::ifstream proc_stat("/proc/stat");
  for (std::string key; proc_stat >> key;) {
    if (key == "btime") {
      proc_stat >> boot_time;
      break;
    }
    proc_stat.ignore(1 << 20, '\n');
  }
  int64_t open_fds = 0;
  std::error_code error;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", error);
       !error && it != std::filesystem::directory_iterator(); it.increment(error))
    ++open_fds;
  rlimit limit{};
  const double max_fds = getrlimit(RLIMIT_NOFILE, &limit) == 0 ? static_cast<double>(limit.rlim_cur) : 0.0;
  append_series(out, "process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.", "",
                (field(14) + field(15)) / ticks);
  append_series(out, "process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.", "", field(23));
  append_series(out, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.", "",
                field(24) * page_bytes);
  append_series(out, "process_start_time_seconds", "gauge", "Start time of the process since unix epoch in seconds.",
                "", boot_time + field(22) / ticks);
  append_series(out, "process_open_fds", "gauge", "Number of open file descriptors.", "",
                static_cast<double>(open_fds));
  append_series(out, "process_max_fds", "gauge", "Maximum number of open file descriptors.", "", max_fds);
}

}  // namespace rs::server
