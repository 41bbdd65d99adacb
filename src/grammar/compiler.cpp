#include "grammar/compiler.h"

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "grammar/gbnf.h"
#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "grammar/regex.h"

namespace rs::grammar {
namespace {

// vLLM's guided_choice: the output is exactly one of the strings, byte for byte.
RuleSet choice_rules(const std::string& text) {
  const auto choices = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!choices.is_array() || choices.empty()) throw Error("the choices must be a non-empty array of strings");
  std::vector<Expr> options;
  for (const auto& choice : choices) {
    if (!choice.is_string()) throw Error("the choices must be a non-empty array of strings");
    options.push_back(Expr::bytes(choice.get<std::string>()));
  }
  RuleSet rules;
  rules.add("root", Expr::alt(std::move(options)));
  return rules;
}

}  // namespace

GrammarCompiler::GrammarCompiler(std::shared_ptr<const TokenVocab> vocab, size_t max_cached)
    : vocab_(std::move(vocab)), max_cached_(std::max<size_t>(max_cached, 1)) {}

std::shared_ptr<const CompiledGrammar> GrammarCompiler::lookup(const std::string& key) {
  std::lock_guard lock(mutex_);
  const auto it = cache_.find(key);
  if (it == cache_.end()) return nullptr;
  recency_.splice(recency_.begin(), recency_, it->second.second);
  return it->second.first;
}

void GrammarCompiler::store(const std::string& key, std::shared_ptr<const CompiledGrammar> grammar) {
  std::lock_guard lock(mutex_);
  if (cache_.contains(key)) return;
  recency_.push_front(key);
  cache_.emplace(key, std::make_pair(std::move(grammar), recency_.begin()));
  while (cache_.size() > max_cached_) {
    cache_.erase(recency_.back());
    recency_.pop_back();
  }
}

std::shared_ptr<const CompiledGrammar> GrammarCompiler::compile(const GrammarSpec& spec) {
  const std::string key = std::to_string(static_cast<int>(spec.kind)) + ":" + spec.text;
  if (auto cached = lookup(key)) return cached;
  auto compiled = std::make_shared<const CompiledGrammar>(lower_rules(rules_for(spec)), vocab_);
  store(key, compiled);
  return compiled;
}

RuleSet GrammarCompiler::rules_for(const GrammarSpec& spec) {
  RuleSet rules;
  switch (spec.kind) {
    case GrammarKind::kJsonObject: rules = json_object_rules(); break;
    case GrammarKind::kRegex: rules = regex_rules(spec.text); break;
    case GrammarKind::kGbnf: rules = parse_gbnf(spec.text); break;
    case GrammarKind::kChoice: rules = choice_rules(spec.text); break;
    case GrammarKind::kJsonSchema: {
      nlohmann::ordered_json schema;
      try {
        schema = nlohmann::ordered_json::parse(spec.text);
      } catch (const nlohmann::ordered_json::exception& e) {
        throw Error(fmt::format("the JSON schema is not valid JSON: {}", e.what()));
      }
      rules = json_schema_rules(schema);
      break;
    }
  }
  return rules;
}

std::shared_ptr<const CompiledGrammar> GrammarCompiler::compile_rules(const RuleSet& rules,
                                                                      const std::string& cache_key) {
  const std::string key = "rules:" + cache_key;
  if (auto cached = lookup(key)) return cached;
  auto compiled = std::make_shared<const CompiledGrammar>(lower_rules(rules), vocab_);
  store(key, compiled);
  return compiled;
}

}  // namespace rs::grammar
