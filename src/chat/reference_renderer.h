// Test support for the reference tests: renders cases with python3-jinja2 (tests/chat/render_jinja2.py,
// configured as transformers) or @huggingface/jinja (tests/chat/render_hf_jinja.mjs, node).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace rs::chat::testing {

enum class Reference { kJinja2, kHfJinja };

struct ReferenceResult {
  bool ok = false;
  std::string output;   // when ok
  std::string error;    // exception class name, when not ok ("TemplateError" = raise_exception in jinja2)
  std::string message;  // exception message
};

// `cases` is the scripts' input ({"cases": [...]}, see render_jinja2.py). Throws std::runtime_error when the
// interpreter, the Jinja package or the script is missing or fails: reference tests fail, they never skip.
std::vector<ReferenceResult> render_reference(Reference reference, const nlohmann::ordered_json& cases);

// Absolute path of a file in the source tree (RS_SOURCE_DIR).
std::string source_path(const std::string& relative);

}  // namespace rs::chat::testing
