// GBNF/EBNF text -> RuleSet: `name ::= alternatives` rules with "literals" and 'literals', [classes] (ranges, ^),
// ., (groups), | alternation, * + ? {m} {m,} {m,n}, # comments; escapes \n \t \r \\ \" \xHH \uHHHH \UHHHHHHHH.
// llama.cpp's and xgrammar's grammar syntax; the start rule is `root`.
#pragma once

#include <string_view>

#include "grammar/expr.h"

namespace rs::grammar {

// Throws rs::Error "grammar at line L, column C: ..." for syntax errors, and for a missing root rule.
RuleSet parse_gbnf(std::string_view text);

}  // namespace rs::grammar
