// ToolCallParser: pulls tool calls out of a chat reply as OpenAI tool calls; the text around them stays content.
// Formats (--tool-call-parser NAME, or auto from the chat template):
//   hermes (alias qwen3)  <tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>
//   qwen3_coder           <tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n</function>\n
//                         </tool_call> (Qwen3-Coder, Qwen3.5): values typed by the request's tool schema
//   llama3_json           a reply that is {"name": ..., "parameters": {...}} (Llama 3.1+, optional <|python_tag|>,
//                         several joined by ';')
//   mistral               [TOOL_CALLS][{"name": ..., "arguments": {...}}, ...] or [TOOL_CALLS]name[ARGS]{...}
// Streaming-safe: tagged formats hold back a possible tag prefix at the end of a piece and release a call once its
// closing tag arrives; whole-reply formats hold a reply that starts like a call until its end. A block or reply that
// does not parse as a call stays content, verbatim.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace rs::server {

struct ToolCall {
  std::string name;
  std::string arguments;  // a JSON text (OpenAI's function.arguments)
};

enum class ToolCallFormat { kHermes, kQwen3Coder, kLlama3Json, kMistral };

// "hermes" / "qwen3", "qwen3_coder", "llama3_json", "mistral"; nullopt for another name.
std::optional<ToolCallFormat> tool_call_format_named(std::string_view name);
// The format a chat template writes tool calls in (for --tool-call-parser auto), or nullopt.
std::optional<ToolCallFormat> tool_call_format_of_template(std::string_view chat_template);

class ToolCallParser {
 public:
  struct Output {
    std::string content;
    std::vector<ToolCall> calls;
  };

  // `tools`: the request's OpenAI tools (qwen3_coder types its string values by their JSON schema); may be null and
  // must outlive the parser.
  explicit ToolCallParser(ToolCallFormat format = ToolCallFormat::kHermes,
                          const nlohmann::ordered_json* tools = nullptr);

  Output feed(std::string_view text);
  // End of the reply: an unfinished call is content.
  Output finish();

 private:
  void close_call(Output& out);
  bool whole_reply() const { return format_ == ToolCallFormat::kLlama3Json || format_ == ToolCallFormat::kMistral; }
  Output feed_whole_reply(std::string_view text);

  ToolCallFormat format_;
  const nlohmann::ordered_json* tools_;  // the request's (outlives the parser: both belong to one generation)
  bool in_call_ = false;
  std::string pending_;  // text that may be the start of a tag
  std::string call_;     // the body of the call being read (whole-reply formats: the held reply)
  enum class Reply { kUndecided, kCall, kContent } reply_ = Reply::kUndecided;
};

}  // namespace rs::server
