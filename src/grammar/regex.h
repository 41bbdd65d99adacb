// Regex -> Expr: the common subset of ECMAScript/Python patterns (literals, escapes, classes, ., groups,
// alternation, * + ? {m} {m,} {m,n}, lazy suffixes), matched against the whole output (anchors ^ $ at the ends only).
#pragma once

#include <string_view>

#include "grammar/expr.h"

namespace rs::grammar {

// Throws rs::Error "regex at line 1, column C: ..." for syntax errors and unsupported features (backreferences,
// lookaround, word boundaries, anchors inside the pattern).
Expr parse_regex(std::string_view pattern);

// A RuleSet whose root matches exactly the strings `pattern` fullmatches.
RuleSet regex_rules(std::string_view pattern);

}  // namespace rs::grammar
