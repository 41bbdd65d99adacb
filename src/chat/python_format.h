// Byte-exact Python formatting that chat templates expose: float repr, str repr, and json.dumps as
// transformers' tojson filter calls it (ensure_ascii=False, insertion key order).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace rs::chat {

// Python repr(float): shortest round-trip digits; exponent form when exponent < -4 or >= 16.
std::string python_float_repr(double value);
// Python repr(str): single quotes unless the text has ' and no ".
std::string python_string_repr(std::string_view text);

struct JsonDumpOptions {
  std::optional<std::string> indent;  // json.dumps(indent=...): an int n becomes n spaces
  std::string item_separator = ", ";  // ", " by default, "," when indent is set
  std::string key_separator = ": ";
  bool sort_keys = false;
  bool ensure_ascii = false;
};

// Python json.dumps. NaN and infinities print as NaN/Infinity/-Infinity, as Python does.
std::string python_json_dumps(const nlohmann::ordered_json& json, const JsonDumpOptions& options);

}  // namespace rs::chat
