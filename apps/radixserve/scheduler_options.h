// The scheduler's and speculative decoding's command-line flags, shared by `serve`, `generate` and `bench throughput`.
#pragma once

#include <CLI/CLI.hpp>

#include "sched/scheduler.h"
#include "spec/speculative_config.h"

namespace rs::app {

// --max-running-requests, --max-prefill-tokens, --chunked-prefill-size, --max-queued-requests, --disable-radix-cache,
// and the --speculative-* flags.
void add_scheduler_options(CLI::App& command, sched::SchedulerConfig& config);
void add_speculative_options(CLI::App& command, spec::SpeculativeConfig& config);

}  // namespace rs::app
