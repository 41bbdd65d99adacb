#include "server/structured_output.h"

#include <gtest/gtest.h>

#include <random>

#include "grammar/matcher.h"

namespace rs::server {
namespace {

using json = nlohmann::ordered_json;
using Kind = OutputConstraint::Kind;

struct Read {
  OutputConstraint constraint;
  std::optional<ApiError> error;
};

Read read(const std::string& body, bool chat = true) {
  Read r;
  r.error = read_output_constraint(json::parse(body), chat, r.constraint);
  return r;
}

bool fullmatch(const std::shared_ptr<const grammar::CompiledGrammar>& g, const std::string& text) {
  grammar::GrammarMatcher matcher(g);
  return matcher.accept_bytes(text) && matcher.can_finish();
}

grammar::GrammarCompiler& compiler() {
  static grammar::GrammarCompiler instance(grammar::TokenVocab::from_bytes({"a"}));
  return instance;
}

std::shared_ptr<const grammar::CompiledGrammar> compile(const OutputConstraint& c) {
  auto compiled = compile_output_constraint(c, compiler());
  EXPECT_TRUE(std::holds_alternative<std::shared_ptr<const grammar::CompiledGrammar>>(compiled));
  return std::get<std::shared_ptr<const grammar::CompiledGrammar>>(compiled);
}

TEST(StructuredOutput, ReadsEachWayToAskForStructure) {
  EXPECT_EQ(read(R"({"response_format": {"type": "text"}})").constraint.kind, Kind::kNone);
  EXPECT_EQ(read(R"({"response_format": {"type": "json_object"}})").constraint.kind, Kind::kJsonObject);
  const Read schema = read(R"({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "strict": true,
      "schema": {"type": "object", "properties": {"b": {"type": "string"}, "a": {"type": "integer"}}}}}})");
  EXPECT_EQ(schema.constraint.kind, Kind::kJsonSchema);
  EXPECT_EQ(schema.constraint.text, R"({"type":"object","properties":{"b":{"type":"string"},"a":{"type":"integer"}}})");
  EXPECT_EQ(read(R"({"regex": "[0-9]+"})").constraint.kind, Kind::kRegex);
  EXPECT_EQ(read(R"({"guided_regex": "[0-9]+"})", false).constraint.kind, Kind::kRegex);
  EXPECT_EQ(read(R"({"ebnf": "root ::= \"x\""})").constraint.kind, Kind::kGrammar);
  EXPECT_EQ(read(R"({"guided_grammar": "root ::= \"x\""})").constraint.kind, Kind::kGrammar);
  EXPECT_EQ(read(R"({"guided_json": {"type": "integer"}})").constraint.text, R"({"type":"integer"})");
  EXPECT_EQ(read(R"({"guided_json": "{\"type\": \"integer\"}"})").constraint.text, R"({"type": "integer"})");
  const std::string tools = R"("tools": [{"type": "function", "function": {"name": "get_weather", "parameters":
      {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
      {"type": "function", "function": {"name": "get_time"}}])";
  const Read required = read("{" + tools + R"(, "tool_choice": "required"})");
  EXPECT_EQ(required.constraint.kind, Kind::kToolCalls);
  EXPECT_EQ(required.constraint.tools.size(), 2u);
  const Read named = read("{" + tools + R"(, "tool_choice": {"type": "function", "function": {"name": "get_time"}}})");
  ASSERT_EQ(named.constraint.tools.size(), 1u);
  EXPECT_EQ(named.constraint.tools[0]["function"]["name"], "get_time");
  EXPECT_EQ(read("{" + tools + R"(, "tool_choice": "auto"})").constraint.kind, Kind::kNone);
  const Read choice = read(R"({"guided_choice": ["yes", "no"]})", false);
  EXPECT_EQ(choice.constraint.kind, Kind::kChoice);
  EXPECT_EQ(choice.constraint.text, R"(["yes","no"])");
  EXPECT_EQ(read(R"({"structured_outputs": {"choice": ["a"]}})").constraint.kind, Kind::kChoice);
  EXPECT_EQ(read(R"({"structured_outputs": {"json": {"type": "integer"}}})").constraint.text, R"({"type":"integer"})");
  EXPECT_EQ(read(R"({"structured_outputs": {"json": "{}"}})").constraint.kind, Kind::kJsonSchema);
  EXPECT_EQ(read(R"({"structured_outputs": {"regex": "a+"}})", false).constraint.kind, Kind::kRegex);
  EXPECT_EQ(read(R"({"structured_outputs": {"grammar": "root ::= \"x\""}})").constraint.kind, Kind::kGrammar);
  const Read object = read(R"({"structured_outputs": {"json_object": true, "regex": null}})");
  EXPECT_EQ(object.constraint.kind, Kind::kJsonObject);
  EXPECT_EQ(object.constraint.param, "structured_outputs");
}

TEST(StructuredOutput, ChoicesMatchExactlyOneString) {
  const auto g = compile(read(R"({"guided_choice": ["yes", "no", "not sure", "é \"q\""]})").constraint);
  for (const char* ok : {"yes", "no", "not sure", "é \"q\""}) EXPECT_TRUE(fullmatch(g, ok)) << ok;
  for (const char* bad : {"", "ye", "yes ", "not", "noyes", "Yes", "\"yes\""}) EXPECT_FALSE(fullmatch(g, bad)) << bad;
  grammar::GrammarMatcher matcher(g);
  ASSERT_TRUE(matcher.accept_bytes("yes"));
  EXPECT_TRUE(matcher.terminated());  // nothing may follow: the request ends there
  grammar::GrammarMatcher shorter(g);
  ASSERT_TRUE(shorter.accept_bytes("no"));
  EXPECT_TRUE(shorter.can_finish());  // "no" may end, or go on to "not sure"
  EXPECT_FALSE(shorter.terminated());
  grammar::GrammarMatcher prefix(g);
  ASSERT_TRUE(prefix.accept_bytes("not"));
  EXPECT_FALSE(prefix.can_finish());
}

TEST(StructuredOutput, MisuseIsA400NamingTheParameter) {
  const auto error_of = [](const std::string& body) {
    const Read r = read(body);
    EXPECT_TRUE(r.error.has_value()) << body;
    return r.error ? r.error->param + ": " + r.error->message : std::string();
  };
  EXPECT_EQ(error_of(R"({"response_format": {"type": "yaml"}})"),
            "response_format: Invalid response_format.type 'yaml': expected 'text', 'json_object' or 'json_schema'.");
  EXPECT_EQ(error_of(R"({"response_format": {"type": "json_schema"}})").substr(0, 16), "response_format:");
  EXPECT_EQ(error_of(R"({"regex": "a", "guided_json": {}})"),
            "guided_json: Only one output constraint may be given; this request has 'regex' and 'guided_json'.");
  EXPECT_EQ(error_of(R"({"regex": 5})").substr(0, 6), "regex:");
  EXPECT_EQ(error_of(R"({"tool_choice": "required"})"),
            "tool_choice: tool_choice 'required' needs a non-empty 'tools' array.");
  EXPECT_EQ(error_of(R"({"tools": [{"type": "function", "function": {"name": "a"}}],
                         "tool_choice": {"type": "function", "function": {"name": "b"}}})"),
            "tool_choice: tool_choice names 'b', which is not one of the tools.");
  EXPECT_EQ(error_of(R"({"tool_choice": "sometimes"})").substr(0, 12), "tool_choice:");
  EXPECT_EQ(error_of(R"({"guided_choice": []})"),
            "guided_choice: 'guided_choice' must be a non-empty array of strings.");
  EXPECT_EQ(error_of(R"({"guided_choice": ["a", 1]})"),
            "guided_choice: 'guided_choice' must be a non-empty array of strings.");
  EXPECT_EQ(error_of(R"({"guided_choice": "a"})"),
            "guided_choice: 'guided_choice' must be a non-empty array of strings.");
  EXPECT_EQ(error_of(R"({"guided_choice": ["a"], "regex": "a"})"),
            "guided_choice: Only one output constraint may be given; this request has 'regex' and 'guided_choice'.");
  EXPECT_EQ(error_of(R"({"structured_outputs": {"choice": ["a"], "regex": "a"}})"),
            "structured_outputs: 'structured_outputs' may hold only one of json, regex, grammar, choice or "
            "json_object; it has 'choice' and 'regex'.");
  EXPECT_EQ(error_of(R"({"structured_outputs": {}})"),
            "structured_outputs: 'structured_outputs' needs one of json, regex, grammar, choice or json_object.");
  EXPECT_EQ(error_of(R"({"structured_outputs": {"whitespace_pattern": " "}})"),
            "structured_outputs: 'structured_outputs.whitespace_pattern' is not supported; give one of json, regex, "
            "grammar, choice or json_object.");
  EXPECT_EQ(error_of(R"({"structured_outputs": {"choice": [true]}})"),
            "structured_outputs.choice: 'structured_outputs.choice' must be a non-empty array of strings.");
  EXPECT_EQ(error_of(R"({"structured_outputs": {"regex": 3}})"),
            "structured_outputs.regex: Invalid type for 'structured_outputs.regex': expected a string, but got an "
            "integer instead.");
  EXPECT_EQ(error_of(R"({"structured_outputs": ["a"]})").substr(0, 19), "structured_outputs:");
  EXPECT_EQ(error_of(R"({"structured_outputs": {"choice": ["a"]}, "guided_json": {}})"),
            "structured_outputs: Only one output constraint may be given; this request has 'guided_json' and "
            "'structured_outputs'.");
}

TEST(StructuredOutput, InvalidSchemasRegexesAndGrammarsAre400s) {
  const auto error_of = [](const std::string& body) {
    const Read r = read(body);
    EXPECT_FALSE(r.error.has_value());
    auto compiled = compile_output_constraint(r.constraint, compiler());
    const ApiError* error = std::get_if<ApiError>(&compiled);
    EXPECT_NE(error, nullptr) << body;
    if (error) {
      EXPECT_EQ(error->status, 400);
    }
    return error ? error->param + ": " + error->message : std::string();
  };
  EXPECT_EQ(error_of(R"({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema":
                        {"type": "object", "properties": {"a": {"type": "strng"}}}}}})"),
            "response_format: Invalid 'response_format': invalid JSON schema at #/properties/a/type: unknown type "
            "'strng'");
  EXPECT_EQ(error_of(R"({"regex": "(ab"})"), "regex: Invalid 'regex': regex at line 1, column 1: unclosed '('");
  EXPECT_EQ(error_of(R"({"ebnf": "root ::= \"a\" | ("})"),
            "ebnf: Invalid 'ebnf': grammar at line 1, column 16: unclosed '('");
  EXPECT_EQ(error_of(R"({"guided_json": "{not json"})").substr(0, 42), "guided_json: Invalid 'guided_json': the JS");
  EXPECT_EQ(error_of(R"({"structured_outputs": {"regex": "(a"}})"),
            "structured_outputs: Invalid 'structured_outputs': regex at line 1, column 1: unclosed '('");
  EXPECT_EQ(error_of(R"({"guided_json": {"type": "integer", "minimum": 3, "maximum": 2}})"),
            "guided_json: Invalid 'guided_json': invalid JSON schema at #: no integer satisfies the minimum and "
            "maximum");
}

// The review's stalls: each grammar held the scheduler thread for 17-67 s of token masks. Now each is a 400 at
// admission: the regex by its nested repetitions, the schema's pattern by the masks probed after its opening quote.
TEST(StructuredOutput, GrammarsTooComplexToMaskAre400s) {
  std::mt19937 rng(5);
  std::vector<std::string> tokens = {"\""};
  for (int i = 0; i < 4000; ++i) {
    std::string token(1 + rng() % 8, 'a');
    for (char& c : token) c = static_cast<char>('a' + rng() % 26);
    tokens.push_back(std::move(token));
  }
  grammar::GrammarCompiler wide(grammar::TokenVocab::from_bytes(std::move(tokens)));
  const auto error_of = [&](const std::string& body) {
    auto compiled = compile_output_constraint(read(body).constraint, wide);
    const ApiError* error = std::get_if<ApiError>(&compiled);
    EXPECT_TRUE(error && error->status == 400) << body;
    return error ? error->message : std::string();
  };
  EXPECT_EQ(error_of(R"({"regex": "(.{0,100}){20}"})"),
            "Invalid 'regex': regex at line 1, column 11: grammar too complex: nested repetitions expand to 2000 "
            "copies (at most 1000)");
  const std::string complex_body = R"({"guided_json": {"type": "string", "pattern": "^(.{0,50}){10}$"}})";
  const std::string pattern = error_of(complex_body);
  EXPECT_TRUE(pattern.starts_with("Invalid 'guided_json': grammar too complex: ")) << pattern;
  // The verdict stays with the cached grammar: the same request is refused again, with the same message, from it.
  const auto cached = wide.compile({grammar::GrammarKind::kJsonSchema, read(complex_body).constraint.text});
  const std::optional<std::string> verdict = cached->admission_verdict();
  ASSERT_TRUE(verdict.has_value());
  EXPECT_TRUE(verdict->starts_with("grammar too complex: ")) << *verdict;
  EXPECT_EQ(error_of(complex_body), pattern);
  // An ordinary schema over the same vocabulary is fine.
  const Read ok = read(R"({"guided_json": {"type": "object", "properties": {"name": {"type": "string",
      "pattern": "^[a-z]{1,20}( [a-z]{1,20}){0,3}$"}, "tags": {"type": "array", "items": {"type": "string"}}}}})");
  EXPECT_TRUE(std::holds_alternative<std::shared_ptr<const grammar::CompiledGrammar>>(
      compile_output_constraint(ok.constraint, wide)));
}

TEST(StructuredOutput, ToolCallGrammarFollowsTheToolsParameters) {
  const Read r = read(R"({"tools": [{"type": "function", "function": {"name": "get_weather", "parameters":
      {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
      "required": ["city"]}}}, {"type": "function", "function": {"name": "now"}}], "tool_choice": "required"})");
  const auto g = compile(r.constraint);
  const std::string weather =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\", \"days\": 2}}\n</tool_call>";
  const std::string now = "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>";
  EXPECT_TRUE(fullmatch(g, weather));
  EXPECT_TRUE(fullmatch(g, "\n\n" + now + "\n" + weather));
  EXPECT_FALSE(fullmatch(g, ""));
  EXPECT_FALSE(fullmatch(g, "Sure! " + now));
  EXPECT_FALSE(fullmatch(g, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"days\": 2}}\n</tool_call>"));
  EXPECT_FALSE(fullmatch(g, "<tool_call>\n{\"name\": \"other\", \"arguments\": {}}\n</tool_call>"));
  Read single = r;
  single.constraint.parallel_tool_calls = false;
  EXPECT_FALSE(fullmatch(compile(single.constraint), now + "\n" + now));
}

}  // namespace
}  // namespace rs::server

namespace rs::server {
namespace {

TEST(StructuredOutput, HarmonyWrapsTheAnswerInTheFinalChannel) {
  const Read r = read(R"({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema":
      {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}}}})");
  auto compiled = compile_output_constraint(r.constraint, compiler(), /*harmony=*/true);
  ASSERT_TRUE(std::holds_alternative<std::shared_ptr<const grammar::CompiledGrammar>>(compiled));
  const auto g = std::get<std::shared_ptr<const grammar::CompiledGrammar>>(compiled);
  const auto special = grammar::special_token_bytes;
  const std::string final_header = special("<|channel|>") + "final" + special("<|message|>");
  EXPECT_TRUE(fullmatch(g, final_header + R"({"ok": true})"));
  EXPECT_TRUE(fullmatch(g, special("<|channel|>") + "analysis" + special("<|message|>") + "Let me think." +
                               special("<|end|>") + special("<|start|>") + "assistant" + final_header +
                               R"({"ok":false})"));
  EXPECT_FALSE(fullmatch(g, R"({"ok": true})"));
  EXPECT_FALSE(fullmatch(g, "\xFF<|channel|>final\xFF<|message|>{}"));
  // A choice in harmony: the final message is exactly one of the strings.
  auto choice = compile_output_constraint(read(R"({"guided_choice": ["yes", "no"]})").constraint, compiler(), true);
  ASSERT_TRUE(std::holds_alternative<std::shared_ptr<const grammar::CompiledGrammar>>(choice));
  const auto c = std::get<std::shared_ptr<const grammar::CompiledGrammar>>(choice);
  EXPECT_TRUE(fullmatch(c, final_header + "no"));
  EXPECT_FALSE(fullmatch(c, final_header + "maybe"));
  EXPECT_FALSE(fullmatch(c, "yes"));
}

}  // namespace
}  // namespace rs::server
