// The periodic "what the server is doing" log line (as SGLang and vLLM print while busy): running and waiting
// requests, KV use, prefix-cache reuse and prefill/decode throughput since the previous line.
#pragma once

#include <optional>
#include <string>

#include "sched/scheduler.h"

namespace rs::server {

// The line for the `seconds` between two scheduler snapshots, or nothing when the server was idle throughout (no
// request running or waiting now, no token processed since `before`).
std::optional<std::string> stats_line(const sched::SchedulerStats& before, const sched::SchedulerStats& now,
                                      double seconds);

}  // namespace rs::server
