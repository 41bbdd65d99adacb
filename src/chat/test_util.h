// Test helpers for the chat module's unit tests: render a template source with JSON variables at a fixed
// time (2025-08-05 10:20:30).
#pragma once

#include <ctime>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "chat/template.h"

namespace rs::chat::testing {

inline std::tm fixed_now() {
  std::tm now{};
  now.tm_year = 2025 - 1900;
  now.tm_mon = 7;
  now.tm_mday = 5;
  now.tm_hour = 10;
  now.tm_min = 20;
  now.tm_sec = 30;
  return now;
}

inline Dict variables_from_json(const nlohmann::ordered_json& json) {
  Dict variables;
  for (auto it = json.begin(); it != json.end(); ++it) variables.set(it.key(), Value::from_json(it.value()));
  return variables;
}

inline std::string render(std::string_view source, std::string_view variables_json = "{}") {
  return Template::parse(source).render(variables_from_json(nlohmann::ordered_json::parse(variables_json)),
                                        fixed_now());
}

}  // namespace rs::chat::testing
