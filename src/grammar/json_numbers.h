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

// The numbers within `schema`'s bounds, exactly, written without an exponent (the json-fraction rule of
// add_json_value_rules must exist), or nullopt when it has none. A fractional bound is taken as the shortest decimal
// that reads back as its double (0.1 is 0.1); bounds with more than 40 fractional digits are refused. Throws as
// bounded_integer does.
std::optional<Expr> bounded_number(const nlohmann::ordered_json& schema, const std::string& path);

}  // namespace rs::grammar
