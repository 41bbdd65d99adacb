// GrammarCompiler: turns a request's constraint (JSON Schema, json_object, regex, GBNF, choices) into a CompiledGrammar
// for one tokenizer, caching results by kind and text so a repeated schema compiles once. Thread-safe.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "grammar/compiled_grammar.h"
#include "grammar/expr.h"
#include "grammar/vocab.h"

namespace rs::grammar {

enum class GrammarKind : uint8_t { kJsonSchema, kJsonObject, kRegex, kGbnf, kChoice };

struct GrammarSpec {
  GrammarKind kind = GrammarKind::kJsonObject;
  // The schema's JSON text, the regex, the grammar, or (kChoice) a JSON array of the strings the output may be;
  // unused for kJsonObject.
  std::string text;
};

class GrammarCompiler {
 public:
  explicit GrammarCompiler(std::shared_ptr<const TokenVocab> vocab, size_t max_cached = 256);

  // Throws rs::Error with a message naming the problem (and its position or JSON pointer) for invalid input.
  std::shared_ptr<const CompiledGrammar> compile(const GrammarSpec& spec);
  // The rules of a spec, uncompiled (for callers that embed them in a larger grammar). Throws as compile() does.
  static RuleSet rules_for(const GrammarSpec& spec);
  // Rules built by the caller (tool-call grammars), cached under `cache_key`.
  std::shared_ptr<const CompiledGrammar> compile_rules(const RuleSet& rules, const std::string& cache_key);

  const TokenVocab& vocab() const { return *vocab_; }

 private:
  std::shared_ptr<const CompiledGrammar> lookup(const std::string& key);
  void store(const std::string& key, std::shared_ptr<const CompiledGrammar> grammar);

  std::shared_ptr<const TokenVocab> vocab_;
  size_t max_cached_;
  std::mutex mutex_;
  std::list<std::string> recency_;  // most recent first
  std::unordered_map<std::string, std::pair<std::shared_ptr<const CompiledGrammar>, std::list<std::string>::iterator>>
      cache_;
};

}  // namespace rs::grammar
