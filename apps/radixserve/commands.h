// The radixserve subcommands; each file adds one to the CLI11 app. main.cpp is the only place that wires modules.
#pragma once

#include <CLI/CLI.hpp>

#include "engine/engine.h"

namespace rs::app {

void add_generate_command(CLI::App& app);
void add_bench_command(CLI::App& app);
// `bench one-batch`, a subcommand of `bench` (returned so that plain `bench` can tell it ran).
CLI::App* add_bench_one_batch_command(CLI::App& bench);
// `bench throughput` (offline, in-process) and `bench serve` (a load generator for a running server).
void add_bench_throughput_command(CLI::App& bench);
void add_bench_serve_command(CLI::App& bench);
void add_serve_command(CLI::App& app);
void add_tokenize_command(CLI::App& app);
void add_chat_template_command(CLI::App& app);

// Engine flags shared by generate, bench and serve (--backend, --threads, --load-format, --page-size, ...).
void add_engine_options(CLI::App& command, engine::EngineConfig& config);
// "0.1.0 (git revision)": --version and the server's /version.
std::string version_string();
// A progress reporter for long work that draws a bar on stderr when it is a terminal, else logs milestones.
std::function<void(const std::string&, double)> make_progress_reporter();

}  // namespace rs::app
