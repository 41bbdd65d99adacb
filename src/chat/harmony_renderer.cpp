// gpt-oss prompt in the harmony format: system block, developer block (instructions + tools), history
// (analysis kept only before a pending tool call) and the generation prompt, as the HF template writes them.
#include "chat/harmony_renderer.h"

#include <optional>

#include "chat/builtins.h"
#include "chat/harmony_internal.h"
#include "chat/template_error.h"

namespace rs::chat {
namespace {

using harmony::field;
using harmony::text;

constexpr std::string_view kDefaultIdentity = "You are ChatGPT, a large language model trained by OpenAI.";

constexpr std::string_view kBrowserTool =
    "## browser\n\n"
    "// Tool for browsing.\n"
    "// The `cursor` appears in brackets before each browsing display: `[{cursor}]`.\n"
    "// Cite information from the tool using the following format:\n"
    "// `【{cursor}†L{line_start}(-L{line_end})?】`, for example: `【6†L9-L11】` or `【8†L3】`.\n"
    "// Do not quote more than 10 words directly from the tool output.\n"
    "// sources=web (default: web)\n"
    "namespace browser {\n\n"
    "// Searches for information related to `query` and displays `topn` results.\n"
    "type search = (_: {\n"
    "query: string,\n"
    "topn?: number, // default: 10\n"
    "source?: string,\n"
    "}) => any;\n\n"
    "// Opens the link `id` from the page indicated by `cursor` starting at line number `loc`, showing `num_lines` "
    "lines.\n"
    "// Valid link ids are displayed with the formatting: `【{id}†.*】`.\n"
    "// If `cursor` is not provided, the most recent page is implied.\n"
    "// If `id` is a string, it is treated as a fully qualified URL associated with `source`.\n"
    "// If `loc` is not provided, the viewport will be positioned at the beginning of the document or centered on "
    "the most relevant passage, if available.\n"
    "// Use this function without `id` to scroll to a new location of an opened page.\n"
    "type open = (_: {\n"
    "id?: number | string, // default: -1\n"
    "cursor?: number, // default: -1\n"
    "loc?: number, // default: -1\n"
    "num_lines?: number, // default: -1\n"
    "view_source?: boolean, // default: false\n"
    "source?: string,\n"
    "}) => any;\n\n"
    "// Finds exact matches of `pattern` in the current page, or the page given by `cursor`.\n"
    "type find = (_: {\n"
    "pattern: string,\n"
    "cursor?: number, // default: -1\n"
    "}) => any;\n\n"
    "} // namespace browser\n\n";

constexpr std::string_view kPythonTool =
    "## python\n\n"
    "Use this tool to execute Python code in your chain of thought. The code will not be shown to the user. This "
    "tool should be used for internal reasoning, but not for code that is intended to be visible to the user (e.g. "
    "when creating plots, tables, or files).\n\n"
    "When you send a message containing Python code to python, it will be executed in a stateful Jupyter notebook "
    "environment. python will respond with the output of the execution or time out after 120.0 seconds. The drive "
    "at '/mnt/data' can be used to save and persist user files. Internet access for this session is UNKNOWN. "
    "Depends on the cluster.\n\n";

constexpr std::string_view kChannelInContent =
    "You have passed a message containing <|channel|> tags in the content field. Instead of doing this, you should "
    "pass analysis messages (the string between '<|message|>' and '<|end|>') in the 'thinking' field, and final "
    "messages (the string between '<|message|>' and '<|end|>') in the 'content' field.";
constexpr std::string_view kChannelInThinking =
    "You have passed a message containing <|channel|> tags in the thinking field. Instead of doing this, you should "
    "pass analysis messages (the string between '<|message|>' and '<|end|>') in the 'thinking' field, and final "
    "messages (the string between '<|message|>' and '<|end|>') in the 'content' field.";
constexpr std::string_view kContentAndThinking =
    "Cannot pass both content and thinking in an assistant message with tool calls! Put the analysis message in one "
    "or the other, but not both.";
constexpr std::string_view kToolWithoutCall =
    "Message has tool role, but there was no previous assistant message with a tool call!";

[[noreturn]] void raise(std::string_view message) { throw TemplateRaised(SourcePos{}, std::string(message)); }

// Key present with a non-null value (the template's `"key" in message`, with null read as absent).
bool present(const Value& message, std::string_view key) {
  const Value& value = field(message, key);
  return !value.is_undefined() && !value.is_none();
}

bool has_tool_calls(const Value& message) {
  const Value& calls = field(message, "tool_calls");
  return calls.is_list() && !calls.as_list().empty();
}

bool mentions_channel(const Value& value) {
  static const Value kAnalysis = Value::string("<|channel|>analysis<|message|>");
  static const Value kFinal = Value::string("<|channel|>final<|message|>");
  if (!value.is_string() && !value.is_list()) return false;
  return contains(value, kAnalysis) || contains(value, kFinal);
}

std::string system_block(const Dict& variables, const Value& tools, const std::tm& now) {
  auto variable = [&](std::string_view name) -> const Value& {
    static const Value kUndefined;
    const Value* value = variables.find(name);
    return value != nullptr ? *value : kUndefined;
  };
  const Value& identity = variable("model_identity");
  const Value& effort = variable("reasoning_effort");
  char date[16];
  std::strftime(date, sizeof(date), "%Y-%m-%d", &now);
  std::string out = "<|start|>system<|message|>";
  out += identity.is_undefined() ? std::string(kDefaultIdentity) : text(identity, "model_identity");
  out += "\nKnowledge cutoff: 2024-06\nCurrent date: ";
  out += date;
  out +=
      "\n\nReasoning: " + (effort.is_undefined() ? std::string("medium") : text(effort, "reasoning_effort")) + "\n\n";
  const Value& builtin_tools = variable("builtin_tools");
  if (truthy(builtin_tools)) {
    bool browser = false;
    bool python = false;
    for (const Value& tool : iterate(builtin_tools)) {
      browser = browser || equals(tool, Value::string("browser"));
      python = python || equals(tool, Value::string("python"));
    }
    out += "# Tools\n\n";
    if (browser) out += kBrowserTool;
    if (python) out += kPythonTool;
  }
  out += "# Valid channels: analysis, commentary, final. Channel must be included for every message.";
  if (truthy(tools)) out += "\nCalls to these tools must go to the commentary channel: 'functions'.";
  return out + "<|end|>";
}

std::string analysis(const std::string& body) {
  return "<|start|>assistant<|channel|>analysis<|message|>" + body + "<|end|>";
}

}  // namespace

std::string render_harmony(const Dict& variables, const std::tm& now) {
  static const Value kUndefined;
  const Value* messages_value = variables.find("messages");
  const Value* tools_value = variables.find("tools");
  const Value& tools = tools_value != nullptr ? *tools_value : kUndefined;
  const Value* generation_value = variables.find("add_generation_prompt");
  const bool add_generation_prompt = generation_value != nullptr && truthy(*generation_value);
  try {
    if (messages_value == nullptr || !messages_value->is_list()) fault("messages must be a list");
    const List& messages = messages_value->as_list();
    if (messages.empty()) fault("messages must not be empty");

    std::string out = system_block(variables, tools, now);
    const Value& first_role = field(messages.front(), "role");
    const bool has_developer =
        equals(first_role, Value::string("developer")) || equals(first_role, Value::string("system"));
    const Value developer = has_developer ? field(messages.front(), "content") : Value::string("");
    if (truthy(developer) || truthy(tools)) {
      out += "<|start|>developer<|message|>";
      if (truthy(developer)) out += "# Instructions\n\n" + to_str(developer) + "\n\n";
      if (truthy(tools)) out += "# Tools\n\n" + render_harmony_tool_namespace(tools);
      out += "<|end|>";
    }

    std::optional<std::string> last_tool_call;  // name of the pending function call, if any
    for (size_t i = has_developer ? 1 : 0; i < messages.size(); ++i) {
      const Value& message = messages[i];
      const Value& role = field(message, "role");
      if (equals(role, Value::string("assistant"))) {
        const Value& content = field(message, "content");
        const Value& thinking = field(message, "thinking");
        if (present(message, "content") && mentions_channel(content)) raise(kChannelInContent);
        if (present(message, "thinking") && mentions_channel(thinking)) raise(kChannelInThinking);
        if (has_tool_calls(message)) {
          bool later_final = false;
          for (size_t j = i + 1; j < messages.size(); ++j) {
            later_final = later_final || (equals(field(messages[j], "role"), Value::string("assistant")) &&
                                          !has_tool_calls(messages[j]));
          }
          Value call = field(message, "tool_calls").as_list().front();
          if (truthy(field(call, "function"))) call = field(call, "function");
          if (truthy(content) && truthy(thinking)) raise(kContentAndThinking);
          if (truthy(content) && !later_final) {
            out += analysis(text(content, "content"));
          } else if (truthy(thinking) && !later_final) {
            out += analysis(text(thinking, "thinking"));
          }
          const std::string name = text(field(call, "name"), "tool call name");
          const Value& content_type = field(call, "content_type");
          out += "<|start|>assistant to=functions." + name + "<|channel|>commentary " +
                 (content_type.is_undefined() ? std::string("json") : text(content_type, "content_type")) +
                 "<|message|>" + harmony::tojson(field(call, "arguments")) + "<|call|>";
          last_tool_call = name;
        } else if (i + 1 == messages.size() && !add_generation_prompt) {
          if (present(message, "thinking")) out += analysis(text(thinking, "thinking"));
          out += "<|start|>assistant<|channel|>final<|message|>" + text(content, "content") + "<|return|>";
        } else {
          out += "<|start|>assistant<|channel|>final<|message|>" + text(content, "content") + "<|end|>";
          last_tool_call.reset();
        }
      } else if (equals(role, Value::string("tool"))) {
        if (!last_tool_call) raise(kToolWithoutCall);
        out += "<|start|>functions." + *last_tool_call + " to=assistant<|channel|>commentary<|message|>" +
               harmony::tojson(field(message, "content")) + "<|end|>";
      } else if (equals(role, Value::string("user"))) {
        out += "<|start|>user<|message|>" + text(field(message, "content"), "content") + "<|end|>";
      }
    }
    if (add_generation_prompt) out += "<|start|>assistant";
    return out;
  } catch (const EvalFault& error) {
    throw TemplateError(SourcePos{}, error.message);
  }
}

}  // namespace rs::chat
