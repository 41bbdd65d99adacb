// JSON Schema's numeric bounds as grammar: minimum, maximum, exclusiveMinimum and exclusiveMaximum (draft 4's boolean
// exclusives too) on integers and numbers, enforced exactly.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "grammar/expr.h"

namespace rs::grammar {

// The integers within `schema`'s bounds (fractional bounds round inwards), or nullopt when it has none. Throws
// rs::Error naming `path` for a bound that is not a number, above 9e15, or leaves no integer.
std::optional<Expr> bounded_integer(const nlohmann::ordered_json& schema, const std::string& path);

// The numbers within `schema`'s bounds, written without an exponent (the json-fraction rule of add_json_value_rules
// must exist), or nullopt when it has none. Bounds must be integers: a fractional one is refused, never rounded.
// Throws as bounded_integer does.
std::optional<Expr> bounded_number(const nlohmann::ordered_json& schema, const std::string& path);

}  // namespace rs::grammar
