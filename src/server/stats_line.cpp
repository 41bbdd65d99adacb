#include "server/stats_line.h"

#include <fmt/format.h>

namespace rs::server {

namespace {

// " accept_len=3.10 accept_rate=52.5%" over the interval when drafts were verified in it, else "".
std::string speculative_summary(const sched::SchedulerStats& before, const sched::SchedulerStats& now) {
  const uint64_t verifies = now.spec_verifies - before.spec_verifies;
  if (verifies == 0) return {};
  const uint64_t drafted = now.spec_draft_tokens - before.spec_draft_tokens;
  const uint64_t accepted = now.spec_accepted_tokens - before.spec_accepted_tokens;
  return fmt::format(" accept_len={:.2f} accept_rate={:.1f}%", 1.0 + static_cast<double>(accepted) / verifies,
                     drafted ? 100.0 * accepted / drafted : 0.0);
}

}  // namespace

std::optional<std::string> stats_line(const sched::SchedulerStats& before, const sched::SchedulerStats& now,
                                      double seconds) {
  const uint64_t prompt = now.prompt_tokens - before.prompt_tokens;
  const uint64_t cached = now.cached_prompt_tokens - before.cached_prompt_tokens;
  const uint64_t generated = now.generation_tokens - before.generation_tokens;
  if (now.num_running == 0 && now.num_queued == 0 && prompt == 0 && generated == 0) return std::nullopt;
  int64_t used = 0, total = 0;
  for (const memory::KvGroupStats& group : now.kv) {
    used += group.used_pages;
    total += group.num_pages;
  }
  const double per_second = seconds > 0 ? 1.0 / seconds : 0.0;
  return fmt::format(
             "running={} waiting={} kv_pages={}/{} ({:.1f}%) prefill={:.1f} tok/s (cached {:.1f}%) decode={:.1f} tok/s "
             "preemptions={}",
             now.num_running, now.num_queued, used, total, total ? 100.0 * used / total : 0.0,
             static_cast<double>(prompt - cached) * per_second, prompt ? 100.0 * cached / prompt : 0.0,
             static_cast<double>(generated) * per_second, now.preemptions - before.preemptions) +
         speculative_summary(before, now);
}

}  // namespace rs::server
