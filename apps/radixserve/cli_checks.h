// Number checks for CLI options, with readable messages. CLI11's PositiveNumber and NonNegativeNumber print DBL_MAX's
// 309 digits as their bound, and they and CLI::Range let NaN through (every comparison with NaN is false).
#pragma once

#include <CLI/CLI.hpp>

namespace rs::app {

// A finite number > 0.
CLI::Validator positive_number();
// A finite number >= 0.
CLI::Validator non_negative_number();
// A finite number in [lo, hi].
CLI::Validator number_in(double lo, double hi);

}  // namespace rs::app
