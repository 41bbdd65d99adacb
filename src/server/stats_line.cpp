#include "server/stats_line.h"

#include <fmt/format.h>

namespace rs::server {

std::optional<std::string> stats_line(const sched::SchedulerStats& before, const sched::SchedulerStats& now,
                                      double seconds) {
  const uint64_t prompt = now.prompt_tokens - before.prompt_tokens;
  const uint64_t cached = now.cached_prompt_tokens - before.cached_prompt_tokens;
  const uint64_t generated = now.generation_tokens - before.generation_tokens;
  if (now.num_running == 0 && now.num_queued == 0 && prompt == 0 && generated == 0) return std::nullopt;
  int64_t used = 0, total = 0;
  for (const sched::KvGroupStats& group : now.kv) {
    used += group.used_pages;
    total += group.num_pages;
  }
  const double per_second = seconds > 0 ? 1.0 / seconds : 0.0;
  return fmt::format(
      "running={} waiting={} kv_pages={}/{} ({:.1f}%) prefill={:.1f} tok/s (cached {:.1f}%) decode={:.1f} tok/s "
      "preemptions={}",
      now.num_running, now.num_queued, used, total, total ? 100.0 * used / total : 0.0,
      static_cast<double>(prompt - cached) * per_second, prompt ? 100.0 * cached / prompt : 0.0,
      static_cast<double>(generated) * per_second, now.preemptions - before.preemptions);
}

}  // namespace rs::server
