// Monotonic time helpers for latency metrics.
#pragma once

#include <chrono>

namespace rs {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace rs
