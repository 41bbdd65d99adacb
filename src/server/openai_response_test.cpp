#include "server/openai_response.h"

#include <gtest/gtest.h>

#include "server/anthropic_messages.h"
#include "server/generation.h"

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
  ResponseBuilder builder(Endpoint::kChat, "m", chat_options(), text);
  ChoiceDelta delta;
  delta.tool_calls = {{"f", "{}"}};
  delta.first_tool_index = 2;  // the choice's third call
  const json chunk = builder.chunk(delta, /*first=*/false)["choices"][0]["delta"];
  EXPECT_EQ(chunk["tool_calls"][0]["index"], 2);
  EXPECT_EQ(chunk["tool_calls"][0]["function"]["name"], "f");
  EXPECT_FALSE(chunk.contains("content"));
}

engine::SampledToken sampled(int32_t id, std::vector<int32_t> alternatives = {}) {
  engine::SampledToken token{.token_id = id, .logprob = -0.5f};
  for (int32_t alt : alternatives) token.top_logprobs.push_back({.token_id = alt, .logprob = -1.0f});
  return token;
}

ModelText byte_level_text() { return ModelText::load(std::string(RS_SOURCE_DIR) + "/tests/tokenizer/data/byte_level"); }

GenerationOptions logprob_options() {
  GenerationOptions options;
  options.sampling.logprobs = true;
  options.sampling.top_logprobs = 2;
  return options;
}

// "hello", then "é" as two byte tokens (C3, A9: each alone decodes as U+FFFD), then " the": offsets count the bytes
// each token adds to the text, streamed or not.
TEST(OpenAiResponse, CompletionTextOffsetsCountTheTextsBytes) {
  const ModelText text = byte_level_text();
  const std::vector<engine::SampledToken> tokens = {sampled(264), sampled(195), sampled(169), sampled(258)};
  const std::vector<int64_t> expected = {0, 5, 6, 7};
  ResponseBuilder whole(Endpoint::kCompletion, "m", logprob_options(), text);
  ChoiceResult result;
  ChoiceDelta all;
  all.sampled = tokens;
  result.append(all);
  EXPECT_EQ(whole.response({result}, Usage{})["choices"][0]["logprobs"]["text_offset"], json(expected));
  ResponseBuilder streamed(Endpoint::kCompletion, "m", logprob_options(), text);
  std::vector<int64_t> offsets;
  for (const auto& piece : {std::vector{tokens[0]}, std::vector{tokens[1]}, std::vector{tokens[2], tokens[3]}}) {
    ChoiceDelta delta;
    delta.sampled = piece;
    ChoiceDelta other = delta;  // a second choice counts from its own start
    other.index = 1;
    const json chunk = streamed.chunk(delta, false);
    for (const json& offset : chunk["choices"][0]["logprobs"]["text_offset"]) offsets.push_back(offset.get<int64_t>());
    EXPECT_EQ(streamed.chunk(other, false)["choices"][0]["logprobs"]["text_offset"][0],
              offsets[offsets.size() - piece.size()]);
  }
  EXPECT_EQ(offsets, expected);
}

TEST(OpenAiResponse, ChatLogprobBytesAreTheTokensRawBytes) {
  const ModelText text = byte_level_text();
  ResponseBuilder builder(Endpoint::kChat, "m", logprob_options(), text);
  ChoiceDelta delta;
  delta.sampled = {sampled(195, {268, 258})};
  const json content = builder.chunk(delta, false)["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 1u);
  EXPECT_EQ(content[0]["token"], "\xEF\xBF\xBD");
  EXPECT_EQ(content[0]["bytes"], json({0xC3}));
  EXPECT_EQ(content[0]["top_logprobs"][0]["bytes"], json({0xE4, 0xBD}));
  EXPECT_EQ(content[0]["top_logprobs"][1]["bytes"], json({' ', 't', 'h', 'e'}));
}

// A request the scheduler failed is answered by whose fault it was: the request's (400), the server's (500), or a step
// that ran out of device memory (503, which Anthropic's clients read as overloaded and retry).
TEST(SchedulerFailure, StatusFollowsTheCause) {
  const ApiError request = scheduler_failure(sched::ErrorCause::kRequest, "too long");
  EXPECT_EQ(request.status, 400);
  EXPECT_EQ(request.type, "invalid_request_error");
  const ApiError server = scheduler_failure(sched::ErrorCause::kServer, "device fell over");
  EXPECT_EQ(server.status, 500);
  EXPECT_EQ(server.type, "server_error");
  const ApiError memory = scheduler_failure(sched::ErrorCause::kOverloaded, "out of memory");
  EXPECT_EQ(memory.status, 503);
  EXPECT_EQ(memory.code, "out_of_memory");
  EXPECT_EQ(memory.message, "out of memory");
  EXPECT_EQ(anthropic_error_json(memory)["error"]["type"], "overloaded_error");
}

}  // namespace
}  // namespace rs::server
