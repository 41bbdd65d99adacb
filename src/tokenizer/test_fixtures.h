// Test helpers: the hand-made tokenizer.json fixtures in tests/tokenizer/data/.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer.h"

namespace rs::tokenizer::testing {

// tokenizer.json of fixture `name` (byte_level, sentencepiece, metaspace), to patch in tests.
nlohmann::json fixture_json(const std::string& name);
nlohmann::json fixture_config(const std::string& name);

// Tokenizer::load of fixture `name`.
Tokenizer load_fixture(const std::string& name);

}  // namespace rs::tokenizer::testing
