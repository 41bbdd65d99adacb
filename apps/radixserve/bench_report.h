// What every `bench` subcommand's --json report carries besides its figures: the command line, the build's git
// revision, the model's config, and the writing of the file itself.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>

#include "loader/hf_config.h"

namespace rs::app {

// This process's command line, shell-quoted where needed (from /proc/self/cmdline; empty where that is unknown).
std::string command_line();

// The git revision this binary was built from (cmake/git_revision.cmake).
std::string git_revision();

// The model facts a report needs to be read later: folder, architecture, shapes, dtype, experts, windows.
nlohmann::json model_json(const std::string& dir, const loader::ModelConfig& mc);

// Writes `report` (indented) to `path`; throws rs::Error when the file cannot be written.
void write_json_report(const std::string& path, const nlohmann::json& report);

// A progress line on stderr for long benchmark runs: redrawn in place on a terminal (5 times a second at most),
// else printed every 10 s.
class ProgressLine {
 public:
  ProgressLine();
  void update(const std::string& text);  // the current state, e.g. "32/64 done, 8 in flight"
  void finish(const std::string& text);  // the last state, always printed, ending the line
 private:
  bool tty_;
  double last_print_s_ = -1e9;
};

}  // namespace rs::app
