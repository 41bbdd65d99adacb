// Integer ranges as grammar: the decimal strings (no leading zeros, "-" for negatives) of the integers in [lo, hi].
#pragma once

#include <cstdint>
#include <optional>

#include "grammar/expr.h"

namespace rs::grammar {

// nullopt bounds are open. Requires lo <= hi when both are set.
Expr integer_range(std::optional<int64_t> lo, std::optional<int64_t> hi);

}  // namespace rs::grammar
