#include "server/anthropic_messages.h"

#include <gtest/gtest.h>

namespace rs::server {
namespace {

using ojson = nlohmann::ordered_json;

ojson chat_of(const std::string& body) {
  auto result = anthropic_to_chat(body);
  if (auto* error = std::get_if<ApiError>(&result)) ADD_FAILURE() << error->message;
  return std::get_if<ojson>(&result) ? std::get<ojson>(result) : ojson();
}

std::string error_of(const std::string& body) {
  auto result = anthropic_to_chat(body);
  auto* error = std::get_if<ApiError>(&result);
  return error ? error->param + ": " + error->message : "no error";
}

TEST(AnthropicToChat, SystemBlocksSamplingAndStops) {
  const ojson chat = chat_of(R"({"model": "m", "max_tokens": 7, "system": [{"type": "text", "text": "a"},
      {"type": "text", "text": "b", "cache_control": {"type": "ephemeral"}}], "temperature": 0.5, "top_k": 3,
      "stop_sequences": ["END"], "stream": true, "metadata": {"user_id": "u"},
      "messages": [{"role": "user", "content": "hi"}]})");
  EXPECT_EQ(chat["model"], "m");
  EXPECT_EQ(chat["max_tokens"], 7);
  EXPECT_EQ(chat["messages"][0], (ojson{{"role", "system"}, {"content", "a\nb"}}));
  EXPECT_EQ(chat["messages"][1], (ojson{{"role", "user"}, {"content", "hi"}}));
  EXPECT_EQ(chat["temperature"], 0.5);
  EXPECT_EQ(chat["top_k"], 3);
  EXPECT_EQ(chat["stop"], ojson::array({"END"}));
  EXPECT_EQ(chat["stream_options"]["include_usage"], true);  // the final message_delta carries usage
  EXPECT_FALSE(chat.contains("metadata"));
}

TEST(AnthropicToChat, ToolUseAndToolResultsBecomeCallsAndToolMessages) {
  const ojson chat = chat_of(R"({"max_tokens": 5, "messages": [
      {"role": "user", "content": "time?"},
      {"role": "assistant", "content": [{"type": "thinking", "thinking": "hm", "signature": "s"},
                                        {"type": "tool_use", "id": "toolu_1", "name": "now", "input": {"tz": "UTC"}}]},
      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                    "content": [{"type": "text", "text": "12:30"}]},
                                   {"type": "text", "text": "thanks"}]}],
      "tools": [{"name": "now", "description": "d", "input_schema": {"type": "object", "properties": {"tz": {}}}}],
      "tool_choice": {"type": "tool", "name": "now"}, "thinking": {"type": "enabled", "budget_tokens": 1024}})");
  const ojson& messages = chat["messages"];
  ASSERT_EQ(messages.size(), 4u);
  EXPECT_TRUE(messages[1]["content"].is_null());
  EXPECT_EQ(messages[1]["reasoning_content"], "hm");
  EXPECT_EQ(messages[1]["tool_calls"][0]["id"], "toolu_1");
  EXPECT_EQ(messages[1]["tool_calls"][0]["function"]["name"], "now");
  EXPECT_EQ(messages[1]["tool_calls"][0]["function"]["arguments"], R"({"tz":"UTC"})");
  EXPECT_EQ(messages[2], (ojson{{"role", "tool"}, {"tool_call_id", "toolu_1"}, {"content", "12:30"}}));
  EXPECT_EQ(messages[3], (ojson{{"role", "user"}, {"content", "thanks"}}));
  EXPECT_EQ(chat["tools"][0]["function"]["parameters"]["properties"].begin().key(), "tz");
  EXPECT_EQ(chat["tool_choice"]["function"]["name"], "now");
  EXPECT_EQ(chat["chat_template_kwargs"]["enable_thinking"], true);
  EXPECT_EQ(chat_of(R"({"max_tokens": 1, "messages": [{"role": "user", "content": "x"}],
                        "tool_choice": {"type": "any"}})")["tool_choice"],
            "required");
}

TEST(AnthropicToChat, RefusesWhatItCannotServe) {
  EXPECT_EQ(error_of(R"({"messages": [{"role": "user", "content": "x"}]})").substr(0, 11), "max_tokens:");
  EXPECT_EQ(error_of(R"({"max_tokens": 1, "messages": []})").substr(0, 9), "messages:");
  EXPECT_NE(error_of(R"({"max_tokens": 1, "messages": [{"role": "user", "content": [{"type": "image",
            "source": {}}]}]})")
                .find("text only"),
            std::string::npos);
  EXPECT_EQ(error_of(R"({"max_tokens": 1, "messages": [{"role": "system", "content": "x"}]})").substr(0, 16),
            "messages[0].role");
  EXPECT_NE(error_of(R"({"max_tokens": 1, "messages": [{"role": "user", "content": "x"}],
            "tools": [{"type": "web_search_20250305", "name": "web_search"}]})")
                .find("not supported"),
            std::string::npos);
  // Fields of the wrong type are 400s, never exceptions (a 500).
  EXPECT_NE(error_of(R"({"max_tokens": 1, "messages": [{"role": 7, "content": "x"}]})"), "no error");
  EXPECT_NE(error_of(R"({"max_tokens": 1, "messages": [{"role": "user", "content": "x"}], "thinking": {"type": 3}})"),
            "no error");
  EXPECT_EQ(anthropic_error_json(server_error(503, "busy"))["error"]["type"], "overloaded_error");
  EXPECT_EQ(anthropic_error_json(invalid_param("x", "bad"))["error"]["type"], "invalid_request_error");
}

TEST(AnthropicStream, EventsOpenAndCloseBlocksInOrder) {
  AnthropicStream stream("msg_1", "m");
  std::string out = stream.start(10);
  ChoiceDelta thinking;
  thinking.reasoning = "hmm";
  out += stream.delta(thinking);
  ChoiceDelta text;
  text.text = "Hi";
  out += stream.delta(text);
  ChoiceDelta call;
  call.tool_calls.push_back({"now", R"({"tz": "UTC"})"});
  call.finish_reason = "stop";
  out += stream.delta(call);
  Usage usage;
  usage.prompt_tokens = 10;
  usage.completion_tokens = 5;
  out += stream.finish(usage);
  std::vector<std::string> events;
  for (size_t at = out.find("event: "); at != std::string::npos; at = out.find("event: ", at + 1))
    events.push_back(out.substr(at + 7, out.find('\n', at) - at - 7));
  const std::vector<std::string> expected = {"message_start",       "ping",
                                             "content_block_start", "content_block_delta",
                                             "content_block_stop",  "content_block_start",
                                             "content_block_delta", "content_block_stop",
                                             "content_block_start", "content_block_delta",
                                             "content_block_stop",  "message_delta",
                                             "message_stop"};
  EXPECT_EQ(events, expected);
  EXPECT_NE(out.find(R"("stop_reason":"tool_use")"), std::string::npos);
  EXPECT_NE(out.find(R"("partial_json":"{\"tz\":\"UTC\"}")"), std::string::npos);
  EXPECT_NE(out.find(R"("index":2)"), std::string::npos);
}

}  // namespace
}  // namespace rs::server
