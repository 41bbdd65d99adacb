#include "server/openai_responses.h"

#include <gtest/gtest.h>

namespace rs::server {
namespace {

using ojson = nlohmann::ordered_json;

TEST(ResponsesToChat, InputItemsInstructionsToolsAndFormat) {
  ResponseStore store;
  auto result = responses_to_chat(R"({"model": "m", "instructions": "be brief", "max_output_tokens": 9,
      "input": [{"role": "developer", "content": "dev"},
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "a"},
                                                                {"type": "input_text", "text": "b"}]},
                {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
                {"type": "function_call", "call_id": "c2", "name": "g", "arguments": "{\"x\":1}"},
                {"type": "function_call_output", "call_id": "c1", "output": "r1"}],
      "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}],
      "tool_choice": {"type": "function", "name": "f"},
      "text": {"format": {"type": "json_schema", "name": "s", "schema": {"type": "object"}, "strict": true}},
      "reasoning": {"effort": "low"}, "stream": true, "store": false, "metadata": {"k": "v"}})",
                                  store);
  ASSERT_TRUE(std::holds_alternative<ResponsesCall>(result)) << std::get<ApiError>(result).message;
  const ResponsesCall& call = std::get<ResponsesCall>(result);
  const ojson& messages = call.chat["messages"];
  ASSERT_EQ(messages.size(), 5u);
  EXPECT_EQ(messages[0], (ojson{{"role", "system"}, {"content", "be brief"}}));
  EXPECT_EQ(messages[1], (ojson{{"role", "system"}, {"content", "dev"}}));
  EXPECT_EQ(messages[2], (ojson{{"role", "user"}, {"content", "ab"}}));
  EXPECT_EQ(messages[3]["tool_calls"].size(), 2u);  // consecutive calls: one assistant turn
  EXPECT_EQ(messages[4], (ojson{{"role", "tool"}, {"tool_call_id", "c1"}, {"content", "r1"}}));
  EXPECT_EQ(call.messages.size(), 4u);  // stored without the instructions
  EXPECT_EQ(call.chat["max_tokens"], 9);
  EXPECT_EQ(call.chat["tools"][0]["function"]["name"], "f");
  EXPECT_EQ(call.chat["tool_choice"]["function"]["name"], "f");
  EXPECT_EQ(call.chat["response_format"]["json_schema"]["name"], "s");
  EXPECT_EQ(call.chat["reasoning_effort"], "low");
  EXPECT_EQ(call.chat["stream_options"]["include_usage"], true);
  EXPECT_FALSE(call.store);
  EXPECT_EQ(call.echo["metadata"]["k"], "v");
  EXPECT_EQ(call.echo["instructions"], "be brief");
}

TEST(ResponsesToChat, PreviousResponsesAndRefusals) {
  ResponseStore store;
  store.put("resp_1", {nlohmann::json::object(), ojson::array({{{"role", "user"}, {"content", "q"}},
                                                               {{"role", "assistant"}, {"content", "a"}}})});
  auto next = responses_to_chat(R"({"previous_response_id": "resp_1", "input": "more"})", store);
  ASSERT_TRUE(std::holds_alternative<ResponsesCall>(next));
  EXPECT_EQ(std::get<ResponsesCall>(next).chat["messages"].size(), 3u);
  auto missing = responses_to_chat(R"({"previous_response_id": "resp_2", "input": "x"})", store);
  ASSERT_TRUE(std::holds_alternative<ApiError>(missing));
  EXPECT_EQ(std::get<ApiError>(missing).status, 404);
  for (const char* body : {R"({"input": 3})", R"({"input": [{"type": "item_reference", "id": "x"}]})",
                           R"({"input": "x", "store": "false"})", R"({"input": [{"role": 5, "content": "x"}]})",
                           R"({"input": "x", "tools": [{"type": "web_search"}]})",
                           R"({"input": [{"role": "user", "content": [{"type": "input_image"}]}]})"})
    EXPECT_TRUE(std::holds_alternative<ApiError>(responses_to_chat(body, store))) << body;
}

TEST(ResponseStore, DropsTheOldestPastItsBounds) {
  ResponseStore store(2, 1 << 20);
  for (const char* id : {"a", "b", "c"}) store.put(id, {nlohmann::json{{"id", id}}, ojson::array()});
  EXPECT_FALSE(store.get("a"));
  EXPECT_TRUE(store.get("b") && store.get("c"));
  EXPECT_TRUE(store.erase("b"));
  EXPECT_FALSE(store.erase("b"));
  ResponseStore small(10, 100);
  small.put("big", {nlohmann::json{{"text", std::string(200, 'x')}}, ojson::array()});
  EXPECT_FALSE(small.get("big"));  // larger than the whole budget: not kept
}

TEST(ResponsesStream, NumbersEventsAndEndsWithTheWholeResponse) {
  ResponsesStream stream("resp_x", "m", nlohmann::json{{"store", true}});
  std::string out = stream.start();
  ChoiceDelta delta;
  delta.text = "hi";
  delta.finish_reason = "length";
  out += stream.delta(delta);
  Usage usage;
  usage.prompt_tokens = 3;
  usage.completion_tokens = 1;
  out += stream.finish(usage);
  int64_t expected = 0;
  for (size_t at = out.find("\"sequence_number\":"); at != std::string::npos;
       at = out.find("\"sequence_number\":", at + 1))
    EXPECT_EQ(std::stoll(out.substr(at + 18)), expected++);
  // created, in_progress, item added, part added, delta, text done, part done, item done, incomplete.
  EXPECT_EQ(expected, 9);
  EXPECT_EQ(stream.final_response()["status"], "incomplete");
  EXPECT_EQ(stream.final_response()["output"][0]["content"][0]["text"], "hi");
}

}  // namespace
}  // namespace rs::server
