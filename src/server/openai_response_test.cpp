#include "server/openai_response.h"

#include <gtest/gtest.h>

namespace rs::server {
namespace {

using nlohmann::json;

GenerationOptions chat_options() {
  GenerationOptions options;
  options.separate_reasoning = true;
  options.parse_tool_calls = true;
  return options;
}

TEST(OpenAiResponse, ToolCallsAndReasoningTakeOpenAisShape) {
  const ModelText text;
  const ResponseBuilder builder(Endpoint::kChat, "m", chat_options(), text);
  ChoiceResult result;
  ChoiceDelta delta;
  delta.text = "\n";
  delta.reasoning = "The user wants the weather.";
  delta.tool_calls = {{"get_weather", R"({"city": "Oslo"})"}, {"get_time", "{}"}};
  delta.finish_reason = "tool_calls";
  result.append(delta);
  const json message = builder.response({result}, Usage{})["choices"][0]["message"];
  EXPECT_TRUE(message["content"].is_null()) << "only whitespace around the calls";
  EXPECT_EQ(message["reasoning_content"], "The user wants the weather.");
  ASSERT_EQ(message["tool_calls"].size(), 2u);
  const json& call = message["tool_calls"][0];
  EXPECT_EQ(call["type"], "function");
  EXPECT_EQ(call["function"]["name"], "get_weather");
  EXPECT_EQ(call["function"]["arguments"], R"({"city": "Oslo"})");
  EXPECT_TRUE(call["id"].get<std::string>().starts_with("call_"));
  EXPECT_NE(call["id"], message["tool_calls"][1]["id"]);
  EXPECT_FALSE(call.contains("index"));
}

TEST(OpenAiResponse, UsageReportsSpeculationOnlyWhereItRan) {
  const ModelText text;
  const ResponseBuilder builder(Endpoint::kChat, "m", chat_options(), text);
  EXPECT_FALSE(builder.usage_chunk(Usage{.prompt_tokens = 3, .completion_tokens = 4})["usage"].contains("speculative"));
  Usage usage{.prompt_tokens = 3, .completion_tokens = 9};
  usage.speculative = {.verifies = 4, .drafted = 16, .accepted = 4};
  const json out = builder.response({}, usage)["usage"];
  EXPECT_EQ(out["total_tokens"], 12);
  EXPECT_EQ(out["speculative"]["verify_steps"], 4);
  EXPECT_EQ(out["speculative"]["draft_tokens"], 16);
  EXPECT_EQ(out["speculative"]["accepted_tokens"], 4);
  EXPECT_DOUBLE_EQ(out["speculative"]["acceptance_rate"].get<double>(), 0.25);
  EXPECT_DOUBLE_EQ(out["speculative"]["accept_length"].get<double>(), 2.0);
}

TEST(OpenAiResponse, StreamedToolCallsCarryTheirIndex) {
  const ModelText text;
  const ResponseBuilder builder(Endpoint::kChat, "m", chat_options(), text);
  ChoiceDelta delta;
  delta.tool_calls = {{"f", "{}"}};
  delta.first_tool_index = 2;  // the choice's third call
  const json chunk = builder.chunk(delta, /*first=*/false)["choices"][0]["delta"];
  EXPECT_EQ(chunk["tool_calls"][0]["index"], 2);
  EXPECT_EQ(chunk["tool_calls"][0]["function"]["name"], "f");
  EXPECT_FALSE(chunk.contains("content"));
}

}  // namespace
}  // namespace rs::server
