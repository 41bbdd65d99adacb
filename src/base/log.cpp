#include "base/log.h"

#include "base/error.h"

namespace rs {

void set_log_level(const std::string& level) {
  auto parsed = spdlog::level::from_str(level);
  RS_CHECK(parsed != spdlog::level::off || level == "off", "unknown log level '{}'", level);
  spdlog::set_level(parsed);
  // Logs go to stderr so that stdout stays machine-readable (generate/bench print JSON).
  spdlog::set_default_logger(spdlog::default_logger());
}

}  // namespace rs
