// Test helpers: does a RuleSet fullmatch a string (through the real lowering and matcher)?
#pragma once

#include <memory>
#include <string>

#include "grammar/compiled_grammar.h"
#include "grammar/matcher.h"

namespace rs::grammar::testing {

inline std::shared_ptr<const CompiledGrammar> compile_for_test(const RuleSet& rules) {
  return std::make_shared<const CompiledGrammar>(lower_rules(rules), TokenVocab::from_bytes({}));
}

// True when the whole of `text` is a sentence of the grammar.
inline bool fullmatch(const std::shared_ptr<const CompiledGrammar>& grammar, const std::string& text) {
  GrammarMatcher matcher(grammar);
  return matcher.accept_bytes(text) && matcher.can_finish();
}

inline bool fullmatch(const RuleSet& rules, const std::string& text) {
  return fullmatch(compile_for_test(rules), text);
}

}  // namespace rs::grammar::testing
