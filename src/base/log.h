// Logging macros over spdlog; request-scoped lines carry rid=.
#pragma once

#include <spdlog/spdlog.h>

#define RS_LOG_DEBUG(...) SPDLOG_DEBUG(__VA_ARGS__)
#define RS_LOG_INFO(...) SPDLOG_INFO(__VA_ARGS__)
#define RS_LOG_WARN(...) SPDLOG_WARN(__VA_ARGS__)
#define RS_LOG_ERROR(...) SPDLOG_ERROR(__VA_ARGS__)

namespace rs {
// Sets the global level from a name ("debug", "info", "warn", "error"); called once from apps/.
void set_log_level(const std::string& level);
}  // namespace rs
