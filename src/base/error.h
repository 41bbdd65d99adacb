// rs::Error and the check macros: cold-path failures throw a formatted message; the check's file:line travels beside it
// (location()) for debug logs, so users and API clients see the message alone.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>
#include <utility>

namespace rs {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message, std::string location = {})
      : std::runtime_error(message), location_(std::move(location)) {}
  // "file.cpp:123" of the failed check, or empty.
  const std::string& location() const { return location_; }

 private:
  std::string location_;
};

// A device (or host) allocation failed: the step that needed it fails with a 503 (retry later), never the process.
class OutOfMemory : public Error {
 public:
  using Error::Error;
};

[[noreturn]] void throw_error(const char* file, int line, const std::string& message);

}  // namespace rs

// RS_CHECK(cond, "fmt", args...): throws rs::Error(message) located at file:line when cond is false.
#define RS_CHECK(cond, ...)                                              \
  do {                                                                   \
    if (!(cond)) [[unlikely]]                                            \
      ::rs::throw_error(__FILE__, __LINE__, ::fmt::format(__VA_ARGS__)); \
  } while (0)

#define RS_FAIL(...) ::rs::throw_error(__FILE__, __LINE__, ::fmt::format(__VA_ARGS__))

// RS_DCHECK: internal invariants in hot loops; compiled out in release builds.
#ifdef NDEBUG
#define RS_DCHECK(cond, ...) \
  do {                       \
  } while (0)
#else
#define RS_DCHECK(cond, ...) RS_CHECK(cond, __VA_ARGS__)
#endif
