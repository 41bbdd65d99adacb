#include "server/structured_output.h"

#include <fmt/format.h>

#include <stdexcept>

#include "base/error.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "server/harmony_grammar.h"

namespace rs::server {
namespace {

using json = nlohmann::ordered_json;
using Kind = OutputConstraint::Kind;

std::optional<ApiError> read_response_format(const json& format, OutputConstraint& out) {
  if (!format.is_object()) return wrong_type("response_format", "an object", format);
  const auto type = format.find("type");
  if (type == format.end() || !type->is_string())
    return invalid_param("response_format", "response_format.type must be 'text', 'json_object' or 'json_schema'.",
                         "invalid_value");
  if (*type == "text") return std::nullopt;
  out.param = "response_format";
  if (*type == "json_object") {
    out.kind = Kind::kJsonObject;
    return std::nullopt;
  }
  if (*type != "json_schema")
    return invalid_param("response_format",
                         fmt::format("Invalid response_format.type '{}': expected 'text', 'json_object' or "
                                     "'json_schema'.",
                                     type->get<std::string>()),
                         "invalid_value");
  const auto spec = format.find("json_schema");
  if (spec == format.end() || !spec->is_object())
    return invalid_param("response_format",
                         "response_format of type 'json_schema' needs a 'json_schema' object {name, schema, strict}.",
                         "missing_required_parameter");
  const auto name = spec->find("name");
  if (name != spec->end() && !name->is_string())
    return invalid_param("response_format", "response_format.json_schema.name must be a string.", "invalid_type");
  const auto schema = spec->find("schema");
  // OpenAI requires a schema; without one any JSON value is allowed (as vLLM does).
  out.kind = Kind::kJsonSchema;
  out.text = schema == spec->end() || schema->is_null() ? "{}" : schema->dump();
  if (schema != spec->end() && !schema->is_object() && !schema->is_boolean())
    return invalid_param("response_format", "response_format.json_schema.schema must be a JSON Schema object.",
                         "invalid_type");
  return std::nullopt;
}

std::optional<ApiError> read_tool_choice(const json& body, const json& choice, OutputConstraint& out) {
  const auto tools = body.find("tools");
  const bool has_tools = tools != body.end() && tools->is_array() && !tools->empty();
  if (choice.is_string() && (choice == "auto" || choice == "none")) return std::nullopt;
  if (choice.is_string() && choice == "required") {
    if (!has_tools) return invalid_param("tool_choice", "tool_choice 'required' needs a non-empty 'tools' array.");
    out.tools = *tools;
  } else if (choice.is_object() && choice.value("type", "") == "function" && choice.contains("function") &&
             choice["function"].is_object() && choice["function"].contains("name") &&
             choice["function"]["name"].is_string()) {
    const std::string name = choice["function"]["name"].get<std::string>();
    if (!has_tools)
      return invalid_param("tool_choice", fmt::format("tool_choice names '{}' but no tools are given.", name));
    for (const json& tool : *tools)
      if (tool.is_object() && tool.contains("function") && tool["function"].is_object() &&
          tool["function"].value("name", "") == name)
        out.tools = json::array({tool});
    if (out.tools.empty())
      return invalid_param("tool_choice", fmt::format("tool_choice names '{}', which is not one of the tools.", name),
                           "invalid_value");
  } else {
    return invalid_param("tool_choice",
                         "tool_choice must be 'none', 'auto', 'required' or {\"type\": \"function\", \"function\": "
                         "{\"name\": ...}}.",
                         "invalid_value");
  }
  for (const json& tool : out.tools)
    if (!tool.is_object() || !tool.contains("function") || !tool["function"].is_object() ||
        !tool["function"].contains("name") || !tool["function"]["name"].is_string())
      return invalid_param("tools", "Each tool must be {\"type\": \"function\", \"function\": {\"name\": ...}}.");
  out.kind = Kind::kToolCalls;
  out.param = "tool_choice";
  const auto parallel = body.find("parallel_tool_calls");
  out.parallel_tool_calls = parallel == body.end() || !parallel->is_boolean() || parallel->get<bool>();
  return std::nullopt;
}

// A literal in the grammar's text for a JSON string: the string's JSON encoding.
grammar::Expr json_literal(const std::string& text) { return grammar::Expr::bytes(json(text).dump()); }

grammar::RuleSet tool_call_rules(const OutputConstraint& constraint) {
  using grammar::Expr;
  grammar::RuleSet rules;
  std::vector<Expr> calls;
  int index = 0;
  for (const json& tool : constraint.tools) {
    const json& function = tool["function"];
    const json parameters = function.contains("parameters") && !function["parameters"].is_null()
                                ? function["parameters"]
                                : json{{"type", "object"}, {"additionalProperties", true}};
    Expr arguments = grammar::add_json_schema(rules, parameters, fmt::format("tool{}-", index++));
    calls.push_back(Expr::seq({Expr::bytes("{\"name\": "), json_literal(function["name"].get<std::string>()),
                               Expr::bytes(", \"arguments\": "), std::move(arguments), Expr::bytes("}")}));
  }
  rules.add("call",
            Expr::seq({Expr::bytes("<tool_call>\n"), Expr::alt(std::move(calls)), Expr::bytes("\n</tool_call>")}));
  Expr more = constraint.parallel_tool_calls ? Expr::repeat(Expr::seq({Expr::bytes("\n"), Expr::ref("call")}), 0, -1)
                                             : Expr::empty();
  rules.add("root", Expr::seq({Expr::repeat(Expr::bytes("\n"), 0, 2), Expr::ref("call"), std::move(more)}));
  return rules;
}

// One constraint's value: a schema (an object, a boolean, or its JSON text), a string (regex, grammar), or choices (a
// non-empty array of strings). `name` is the parameter errors name ("guided_choice", "structured_outputs.choice").
std::optional<ApiError> read_value(const std::string& name, Kind kind, const json& value, OutputConstraint& out) {
  out.kind = kind;
  if (kind == Kind::kJsonSchema && (value.is_object() || value.is_boolean())) {
    out.text = value.dump();
  } else if (kind == Kind::kChoice) {
    bool strings = value.is_array() && !value.empty();
    for (const json& choice : value) strings = strings && choice.is_string();
    if (!strings)
      return invalid_param(name, fmt::format("'{}' must be a non-empty array of strings.", name), "invalid_type");
    out.text = value.dump();
  } else if (value.is_string()) {
    out.text = value.get<std::string>();
  } else {
    return wrong_type(name, kind == Kind::kJsonSchema ? "a JSON Schema object or string" : "a string", value);
  }
  return std::nullopt;
}

// vLLM's structured_outputs, its newer spelling of the guided_* fields: an object holding exactly one of json, regex,
// grammar, choice, or json_object: true. Other keys (whitespace_pattern, structural_tag, ...) are refused, never
// ignored.
std::optional<ApiError> read_structured_outputs(const json& value, OutputConstraint& out) {
  static constexpr const char* kParam = "structured_outputs";
  static constexpr const char* kKeys = "json, regex, grammar, choice or json_object";
  if (!value.is_object()) return wrong_type(kParam, "an object", value);
  out.param = kParam;
  std::vector<std::string> given;
  for (const auto& [key, v] : value.items()) {
    if (v.is_null() || (key == "json_object" && v == false)) continue;
    const std::string name = std::string(kParam) + "." + key;
    std::optional<ApiError> error;
    if (key == "json") {
      error = read_value(name, Kind::kJsonSchema, v, out);
    } else if (key == "regex") {
      error = read_value(name, Kind::kRegex, v, out);
    } else if (key == "grammar") {
      error = read_value(name, Kind::kGrammar, v, out);
    } else if (key == "choice") {
      error = read_value(name, Kind::kChoice, v, out);
    } else if (key == "json_object") {
      if (v != true) return wrong_type(name, "a boolean", v);
      out.kind = Kind::kJsonObject;
    } else {
      return invalid_param(kParam, fmt::format("'{}' is not supported; give one of {}.", name, kKeys),
                           "unsupported_parameter");
    }
    if (error) return error;
    given.push_back(key);
  }
  if (given.empty())
    return invalid_param(kParam, fmt::format("'structured_outputs' needs one of {}.", kKeys), "invalid_value");
  if (given.size() > 1)
    return invalid_param(
        kParam,
        fmt::format("'structured_outputs' may hold only one of {}; it has '{}' and '{}'.", kKeys, given[0], given[1]),
        "invalid_value");
  return std::nullopt;
}

// The first masks must fit GrammarMatcher::kMaxWork: a 400 now rather than a failed request later. Following the
// longest allowed token reaches the deep states where ambiguous grammars cost most (a JSON string's pattern starts
// after its quote). This runs on the HTTP thread; the masks are cached with the grammar for the scheduler thread.
void probe_masks(const std::shared_ptr<const grammar::CompiledGrammar>& compiled) {
  constexpr int kProbeSteps = 4;
  const grammar::TokenVocab& vocab = compiled->vocab();
  grammar::GrammarMatcher probe(compiled);
  std::vector<uint32_t> mask(grammar::bitmask_words(vocab.size()));
  for (int step = 0; step < kProbeSteps && !probe.terminated(); ++step) {
    probe.fill_next_token_bitmask(mask, {});
    int32_t longest = -1;
    size_t longest_bytes = 0;
    for (int32_t id = 0; id < vocab.size(); ++id)
      if ((mask[id >> 5] >> (id & 31)) & 1u && vocab.token_bytes(id).size() > longest_bytes) {
        longest = id;
        longest_bytes = vocab.token_bytes(id).size();
      }
    if (longest < 0 || !probe.accept_token(longest)) return;
  }
}

// probe_masks once per compiled grammar (cached by the compiler): a grammar refused once is refused again at once,
// without spending another ~kMaxWork of automaton steps per request.
void check_admission(const std::shared_ptr<const grammar::CompiledGrammar>& compiled) {
  if (const std::optional<std::string> verdict = compiled->admission_verdict()) {
    if (!verdict->empty()) throw std::runtime_error(*verdict);
    return;
  }
  try {
    probe_masks(compiled);
  } catch (const std::exception& e) {
    compiled->set_admission_verdict(e.what());
    throw;
  }
  compiled->set_admission_verdict({});
}

}  // namespace

std::optional<ApiError> read_output_constraint(const json& body, bool chat, OutputConstraint& out) {
  struct Source {
    const char* param;
    Kind kind;
  };
  static constexpr Source kExtensions[] = {
      {"regex", Kind::kRegex},        {"ebnf", Kind::kGrammar},           {"guided_json", Kind::kJsonSchema},
      {"guided_regex", Kind::kRegex}, {"guided_grammar", Kind::kGrammar}, {"guided_choice", Kind::kChoice}};
  std::vector<std::string> given;
  if (const auto format = body.find("response_format"); format != body.end() && !format->is_null()) {
    if (auto error = read_response_format(*format, out)) return error;
    if (out.kind != Kind::kNone) given.push_back("response_format");
  }
  for (const Source& source : kExtensions) {
    const auto value = body.find(source.param);
    if (value == body.end() || value->is_null()) continue;
    given.push_back(source.param);
    out.param = source.param;
    if (auto error = read_value(source.param, source.kind, *value, out)) return error;
  }
  if (const auto value = body.find("structured_outputs"); value != body.end() && !value->is_null()) {
    given.push_back("structured_outputs");
    if (auto error = read_structured_outputs(*value, out)) return error;
  }
  if (chat)
    if (const auto choice = body.find("tool_choice"); choice != body.end() && !choice->is_null()) {
      OutputConstraint tools;
      if (auto error = read_tool_choice(body, *choice, tools)) return error;
      if (tools.kind != Kind::kNone) {
        given.push_back("tool_choice");
        out = std::move(tools);
      }
    }
  if (given.size() > 1)
    return invalid_param(given[1],
                         fmt::format("Only one output constraint may be given; this request has '{}' and "
                                     "'{}'.",
                                     given[0], given[1]),
                         "invalid_value");
  return std::nullopt;
}

std::variant<std::shared_ptr<const grammar::CompiledGrammar>, ApiError> compile_output_constraint(
    const OutputConstraint& constraint, grammar::GrammarCompiler& compiler, bool harmony) {
  if (constraint.kind == Kind::kNone) return invalid_param(constraint.param, "no output constraint was given");
  try {
    std::shared_ptr<const grammar::CompiledGrammar> compiled;
    if (constraint.kind == Kind::kToolCalls) {
      const std::string key = fmt::format("tools:{}:{}", constraint.parallel_tool_calls, constraint.tools.dump());
      compiled = harmony ? compiler.compile_rules(harmony_tool_call_rules(constraint.tools), "harmony-" + key)
                         : compiler.compile_rules(tool_call_rules(constraint), key);
    } else {
      static constexpr grammar::GrammarKind kKinds[] = {
          grammar::GrammarKind::kJsonObject, grammar::GrammarKind::kJsonObject, grammar::GrammarKind::kJsonSchema,
          grammar::GrammarKind::kRegex,      grammar::GrammarKind::kGbnf,       grammar::GrammarKind::kChoice};
      grammar::GrammarSpec spec{kKinds[static_cast<int>(constraint.kind)], constraint.text};
      if (spec.kind == grammar::GrammarKind::kJsonObject) spec.text.clear();
      compiled = harmony ? compiler.compile_rules(harmony_answer_rules(grammar::GrammarCompiler::rules_for(spec)),
                                                  fmt::format("harmony:{}:{}", static_cast<int>(spec.kind), spec.text))
                         : compiler.compile(spec);
    }
    check_admission(compiled);
    return compiled;
  } catch (const std::exception& e) {
    const std::string param = constraint.kind == Kind::kToolCalls ? "tools" : constraint.param;
    return invalid_param(param, fmt::format("Invalid '{}': {}", param, e.what()), "invalid_value");
  }
}

}  // namespace rs::server
