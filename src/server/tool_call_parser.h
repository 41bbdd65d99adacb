// ToolCallParser: pulls tool calls out of a chat reply written in the Qwen3 / Hermes format,
//   <tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>
// as OpenAI tool calls; the text around them stays content. Streaming-safe like ReasoningParser: a possible
// "<tool_call>" prefix at the end of a piece is held back, and a call is released once its closing tag arrives.
// A block that is not a JSON object with a string "name" stays content, tags included.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace rs::server {

struct ToolCall {
  std::string name;
  std::string arguments;  // a JSON text (OpenAI's function.arguments)
};

class ToolCallParser {
 public:
  struct Output {
    std::string content;
    std::vector<ToolCall> calls;
  };

  Output feed(std::string_view text);
  // End of the reply: an unfinished call is content.
  Output finish();

 private:
  void close_call(Output& out);

  bool in_call_ = false;
  std::string pending_;  // text that may be the start of a tag
  std::string call_;     // the body of the call being read
};

}  // namespace rs::server
