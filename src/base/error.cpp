#include "base/error.h"

#include <cstring>

namespace rs {

void throw_error(const char* file, int line, const std::string& message) {
  const char* base = std::strrchr(file, '/');
  throw Error(message, fmt::format("{}:{}", base ? base + 1 : file, line));
}

}  // namespace rs
