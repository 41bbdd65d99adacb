// ApiError: a user-facing error as a value (STYLE 7), rendered as OpenAI's {"error": {message, type, param, code}}.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace rs::server {

struct ApiError {
  int status = 400;  // HTTP status
  std::string message;
  std::string type = "invalid_request_error";  // OpenAI error types: invalid_request_error, server_error, ...
  std::string param;                           // offending field, empty = null
  std::string code;                            // machine-readable code, empty = null
};

inline nlohmann::json error_json(const ApiError& error) {
  auto null_if_empty = [](const std::string& s) { return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s); };
  return {{"error",
           {{"message", error.message},
            {"type", error.type},
            {"param", null_if_empty(error.param)},
            {"code", null_if_empty(error.code)}}}};
}

inline ApiError api_error(int status, std::string type, std::string message, std::string param = {},
                          std::string code = {}) {
  ApiError error;
  error.status = status;
  error.type = std::move(type);
  error.message = std::move(message);
  error.param = std::move(param);
  error.code = std::move(code);
  return error;
}

// A 400 about one request field.
inline ApiError invalid_param(const std::string& param, const std::string& message, const std::string& code = {}) {
  return api_error(400, "invalid_request_error", message, param, code);
}

// "a string", "an integer", ... as OpenAI names a JSON value's type in its errors.
inline std::string json_type_name(const nlohmann::json& value) {
  if (value.is_string()) return "a string";
  if (value.is_boolean()) return "a boolean";
  if (value.is_number_integer() || value.is_number_unsigned()) return "an integer";
  if (value.is_number()) return "a number";
  if (value.is_array()) return "an array";
  if (value.is_object()) return "an object";
  return "null";
}

inline ApiError wrong_type(const std::string& name, const char* expected, const nlohmann::json& got) {
  return invalid_param(
      name, "Invalid type for '" + name + "': expected " + expected + ", but got " + json_type_name(got) + " instead.",
      "invalid_type");
}

// A 5xx that is the server's fault or state, not the request's.
inline ApiError server_error(int status, const std::string& message, const std::string& code = {}) {
  return api_error(status, "server_error", message, {}, code);
}

}  // namespace rs::server
