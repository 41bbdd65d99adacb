// The shared parts of the bench commands' JSON reports (see bench_report.h).
#include "apps/radixserve/bench_report.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "base/error.h"
#include "radixserve_git_revision.h"  // generated at build time by cmake/git_revision.cmake

namespace rs::app {

std::string command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string arg, line;
  while (std::getline(in, arg, '\0')) {
    if (!line.empty()) line += ' ';
    const bool plain = !arg.empty() && arg.find_first_not_of(
                                           "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                           "0123456789-_./,=:+@%") == std::string::npos;
    if (plain) {
      line += arg;
      continue;
    }
    line += '\'';
    for (char c : arg) line += c == '\'' ? std::string("'\\''") : std::string(1, c);
    line += '\'';
  }
  return line;
}

std::string git_revision() { return RS_GIT_REVISION; }

nlohmann::json model_json(const std::string& dir, const loader::ModelConfig& mc) {
  return {{"dir", dir},
          {"architecture", mc.architecture},
          {"hidden_size", mc.hidden_size},
          {"num_layers", mc.num_layers},
          {"num_heads", mc.num_heads},
          {"num_kv_heads", mc.num_kv_heads},
          {"head_dim", mc.head_dim},
          {"vocab_size", mc.vocab_size},
          {"dtype", std::string(dtype_name(mc.dtype))},
          {"quant_method", mc.quant_method},
          {"num_experts", mc.num_experts},
          {"num_experts_per_tok", mc.num_experts_per_tok},
          {"layer_windows", mc.layer_windows}};
}

void write_json_report(const std::string& path, const nlohmann::json& report) {
  std::ofstream out(path);
  RS_CHECK(out, "cannot write {}", path);
  out << report.dump(2) << '\n';
  RS_CHECK(out.good(), "writing {} failed", path);
}

ProgressLine::ProgressLine() : tty_(::isatty(STDERR_FILENO)) {}

void ProgressLine::update(const std::string& text) {
  const double now = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  if (now - last_print_s_ < (tty_ ? 0.2 : 10.0)) return;
  last_print_s_ = now;
  std::fprintf(stderr, tty_ ? "\r%s\033[K" : "%s\n", text.c_str());
  std::fflush(stderr);
}

void ProgressLine::finish(const std::string& text) {
  std::fprintf(stderr, tty_ ? "\r%s\033[K\n" : "%s\n", text.c_str());
  std::fflush(stderr);
}

}  // namespace rs::app
