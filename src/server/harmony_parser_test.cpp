#include "server/harmony_parser.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace rs::server {
namespace {

// Fake ids for the special tokens; text tokens carry their text.
const HarmonyTokens kTokens{.start = 1, .end = 2, .message = 3, .channel = 4, .constrain = 5, .return_ = 6, .call = 7};
constexpr int32_t kText = 100;
using Tokens = std::vector<std::pair<int32_t, std::string>>;

struct Routed {
  std::string reasoning, content, call, function;
};

// Pushes (id, text) pairs; returns the text routed to reasoning, content and tool calls.
Routed route(const Tokens& tokens, bool tool_calls = false) {
  HarmonyParser parser(kTokens, tool_calls);
  Routed out;
  for (const auto& [id, text] : tokens) {
    const HarmonyParser::Route r = parser.push(id, text);
    if (r == HarmonyParser::Route::kReasoning) out.reasoning += text;
    if (r == HarmonyParser::Route::kContent) out.content += text;
    if (r == HarmonyParser::Route::kToolCall) out.call += text, out.function = parser.function();
  }
  return out;
}

TEST(HarmonyParser, AnalysisIsReasoningAndFinalIsContent) {
  const Tokens tokens = {
      {4, ""}, {kText, "analysis"},  {3, ""}, {kText, "User asks 2+2."}, {kText, " Easy."}, {2, ""},
      {1, ""}, {kText, "assistant"}, {4, ""}, {kText, "final"},          {3, ""},           {kText, "It is 4."},
      {6, ""}};
  const Routed r = route(tokens);
  EXPECT_EQ(r.reasoning, "User asks 2+2. Easy.");
  EXPECT_EQ(r.content, "It is 4.");
}

TEST(HarmonyParser, MessagesToFunctionsAreToolCallsWhenAsked) {
  const Tokens call = {{4, ""},
                       {kText, "commentary"},
                       {kText, " to=functions.get_weather"},
                       {5, ""},
                       {kText, "json"},
                       {3, ""},
                       {kText, "{\"city\":\"Oslo\"}"},
                       {7, ""}};
  const Routed with_tools = route(call, /*tool_calls=*/true);
  EXPECT_EQ(with_tools.call, "{\"city\":\"Oslo\"}");
  EXPECT_EQ(with_tools.function, "get_weather");
  EXPECT_EQ(with_tools.content, "");
  const Routed without = route(call, /*tool_calls=*/false);  // the request had no tools
  EXPECT_EQ(without.content, "{\"city\":\"Oslo\"}");
  // The recipient may also come before the channel: "<|start|>assistant to=functions.f<|channel|>commentary".
  const Routed before =
      route({{kText, " to=functions.lookup"}, {4, ""}, {kText, "commentary"}, {3, ""}, {kText, "{}"}, {7, ""}}, true);
  EXPECT_EQ(before.function, "lookup");
  EXPECT_EQ(before.call, "{}");
}

TEST(HarmonyParser, ReportsTheEndOfEachMessage) {
  HarmonyParser parser(kTokens, false);
  parser.push(4, ""), parser.push(kText, "analysis"), parser.push(3, "");
  EXPECT_EQ(parser.current_route(), HarmonyParser::Route::kReasoning);
  EXPECT_EQ(parser.push(kText, "x"), HarmonyParser::Route::kReasoning);
  EXPECT_EQ(parser.push(2, ""), HarmonyParser::Route::kNone);
  EXPECT_TRUE(parser.message_ended());
  EXPECT_EQ(parser.last_route(), HarmonyParser::Route::kReasoning);
  EXPECT_EQ(parser.current_route(), HarmonyParser::Route::kNone);
  EXPECT_EQ(parser.push(kText, "stray"), HarmonyParser::Route::kNone);  // between messages: not text
  EXPECT_FALSE(parser.message_ended());
}

TEST(HarmonyParser, AModelThatIgnoresHarmonyIsShownAsIs) {
  Tokens tokens;
  for (int i = 0; i < 80; ++i) tokens.push_back({kText, "w"});
  const Routed r = route(tokens);
  EXPECT_EQ(r.content.size(), 80u - 64u);  // after 64 header tokens without <|message|>, the rest is content
}

}  // namespace
}  // namespace rs::server
