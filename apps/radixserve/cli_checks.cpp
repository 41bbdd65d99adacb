#include "apps/radixserve/cli_checks.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <limits>

namespace rs::app {
namespace {

// `lo_open`: lo itself is out. `what` ends "INPUT is not <what>" (CLI11 prefixes the option's name); `label` shows in
// --help after the type, as CLI11's own checks do.
CLI::Validator number_check(double lo, double hi, bool lo_open, std::string what, std::string label) {
  auto check = [=](const std::string& input) -> std::string {
    char* end = nullptr;
    const double value = std::strtod(input.c_str(), &end);
    const bool parsed = !input.empty() && end == input.c_str() + input.size();
    if (parsed && std::isfinite(value) && (lo_open ? value > lo : value >= lo) && value <= hi) return {};
    return fmt::format("{} is not {}", input, what);
  };
  return CLI::Validator(check, std::move(label), "");
}

}  // namespace

CLI::Validator positive_number() {
  return number_check(0, std::numeric_limits<double>::max(), true, "a number > 0", "POSITIVE");
}

CLI::Validator non_negative_number() {
  return number_check(0, std::numeric_limits<double>::max(), false, "a number >= 0", "NONNEGATIVE");
}

CLI::Validator number_in(double lo, double hi) {
  return number_check(lo, hi, false, fmt::format("a number in [{}, {}]", lo, hi), fmt::format("[{}, {}]", lo, hi));
}

}  // namespace rs::app
