// The report of `radixserve bench serve`: one row per load level in two tables (throughput, latency) and the JSON
// of every figure of a level.
#pragma once

#include <iosfwd>
#include <nlohmann/json.hpp>
#include <string>

#include "loadgen/load_runner.h"
#include "loadgen/run_summary.h"

namespace rs::app {

// One load level: its label ("8" for a concurrency, "2.5/s" for a rate), what it measured, and the raw run.
struct ServeLevel {
  std::string label;
  loadgen::RunSummary summary;
  loadgen::LoadRun run;
};

// Prints the throughput and latency tables of `levels`, then the errors of any level that had some.
void print_serve_tables(std::ostream& out, const std::vector<ServeLevel>& levels, bool with_slo);

// Every figure of one level (latencies in ms), with up to 5 example error messages.
nlohmann::json serve_level_json(const ServeLevel& level);

}  // namespace rs::app
