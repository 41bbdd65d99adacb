// Loads the fixtures written by tests/tokenizer/make_fixtures.py.
#include "tokenizer/test_fixtures.h"

#include <filesystem>
#include <fstream>

namespace rs::tokenizer::testing {
namespace {

std::filesystem::path fixture_dir(const std::string& name) {
  return std::filesystem::path(RS_SOURCE_DIR) / "tests/tokenizer/data" / name;
}

}  // namespace

nlohmann::json fixture_json(const std::string& name) {
  std::ifstream file(fixture_dir(name) / "tokenizer.json");
  return nlohmann::json::parse(file);
}

nlohmann::json fixture_config(const std::string& name) {
  std::ifstream file(fixture_dir(name) / "tokenizer_config.json");
  return nlohmann::json::parse(file);
}

Tokenizer load_fixture(const std::string& name) { return Tokenizer::load(fixture_dir(name)); }

}  // namespace rs::tokenizer::testing
