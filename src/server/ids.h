// Ids of responses, calls and output items.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <random>
#include <string>

namespace rs::server {

// PREFIX + 96 bits from the system's random source: a /v1/responses id is the key to a stored conversation (GET,
// DELETE, previous_response_id), so no id may be predictable from those a client has seen.
inline std::string random_id(const char* prefix) {
  std::random_device random;
  return fmt::format("{}{:08x}{:08x}{:08x}", prefix, random(), random(), random());
}

}  // namespace rs::server
