// Runs the reference renderer scripts through popen, exchanging JSON through temporary files.
#include "chat/reference_renderer.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace rs::chat::testing {

std::string source_path(const std::string& relative) { return std::string(RS_SOURCE_DIR) + "/" + relative; }

std::vector<ReferenceResult> render_reference(Reference reference, const nlohmann::ordered_json& cases) {
  static int counter = 0;
  const auto stem = std::filesystem::temp_directory_path() /
                    ("rs_chat_reference_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
  const std::string input = stem.string() + ".json";
  const std::string errors = stem.string() + ".err";
  std::ofstream(input) << cases.dump();
  const std::string command =
      reference == Reference::kJinja2
          ? "python3 '" + source_path("tests/chat/render_jinja2.py") + "' '" + input + "' 2>'" + errors + "'"
          : "node '" + source_path("tests/chat/render_hf_jinja.mjs") + "' '" + input + "' 2>'" + errors + "'";
  std::string output;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) throw std::runtime_error("cannot run: " + command);
  char buffer[65536];
  for (size_t read = 0; (read = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0;) output.append(buffer, read);
  const int status = ::pclose(pipe);
  std::ostringstream stderr_text;
  stderr_text << std::ifstream(errors).rdbuf();
  std::filesystem::remove(input);
  std::filesystem::remove(errors);
  if (status != 0) {
    throw std::runtime_error("reference renderer failed (" + command + "), exit status " + std::to_string(status) +
                             ": " + stderr_text.str());
  }
  const auto results_json = nlohmann::ordered_json::parse(output);
  std::vector<ReferenceResult> results;
  for (const auto& result : results_json) {
    results.push_back(ReferenceResult{result.value("ok", false), result.value("output", ""), result.value("error", ""),
                                      result.value("message", "")});
  }
  if (results.size() != cases["cases"].size()) throw std::runtime_error("reference renderer returned a wrong count");
  return results;
}

}  // namespace rs::chat::testing
