// JSON Schema -> RuleSet: the grammar of the JSON texts a schema accepts (the subset real APIs use: types,
// properties/required/additionalProperties, enum/const, items/prefixItems/minItems/maxItems, anyOf/oneOf/allOf,
// $ref into $defs/definitions, string lengths, patterns and common formats, minimum/maximum and their exclusive forms).
#pragma once

#include <string>

#include <nlohmann/json_fwd.hpp>

#include "grammar/expr.h"

namespace rs::grammar {

// Throws rs::Error naming the JSON pointer of the offending part ("at #/properties/age: ...") for an invalid schema
// or a keyword that would change which outputs are valid but is not enforced (not, if/then/else, uniqueItems, ...).
// Objects allow only the listed properties unless additionalProperties says otherwise (as OpenAI's strict mode and
// xgrammar do), in the order the schema lists them; exponents have at most two digits (numbers stay finite doubles);
// oneOf is enforced as anyOf. Integer bounds are exact (fractional ones round inwards); number bounds are exact too,
// fractional ones as the decimals written (digit by digit), bounded numbers being written without an exponent. Output
// JSON may hold a space or a newline plus indentation between tokens.
RuleSet json_schema_rules(const nlohmann::ordered_json& schema);

// Adds the rules of `schema` to `rules` (generated names start with `prefix`, so several schemas can share one
// RuleSet) and returns the Expr of one instance of it. Throws as json_schema_rules does.
Expr add_json_schema(RuleSet& rules, const nlohmann::ordered_json& schema, const std::string& prefix);

// Any JSON object (response_format json_object).
RuleSet json_object_rules();

// Appends the rules of plain JSON values (ws, json-value, json-string, json-number, ...) to `rules`, once.
void add_json_value_rules(RuleSet& rules);

}  // namespace rs::grammar
