// Native gpt-oss harmony renderer against the format in MODELS.md §6 (the reference test checks it against
// jinja2 rendering of the HF template as well).
#include "chat/harmony_renderer.h"

#include <gtest/gtest.h>

#include "chat/template_error.h"
#include "chat/test_util.h"

namespace rs::chat {
namespace {

constexpr std::string_view kSystem =
    "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\nKnowledge cutoff: 2024-06\n"
    "Current date: 2025-08-05\n\nReasoning: medium\n\n# Valid channels: analysis, commentary, final. Channel must be "
    "included for every message.";

std::string render(std::string_view variables_json) {
  return render_harmony(testing::variables_from_json(nlohmann::ordered_json::parse(variables_json)),
                        testing::fixed_now());
}

TEST(HarmonyRendererTest, SystemUserAndGenerationPrompt) {
  EXPECT_EQ(render(R"({"messages": [{"role": "user", "content": "Hi"}], "add_generation_prompt": true})"),
            std::string(kSystem) + "<|end|><|start|>user<|message|>Hi<|end|><|start|>assistant");
}

TEST(HarmonyRendererTest, ReasoningEffortIdentityAndSystemMessageAsInstructions) {
  EXPECT_EQ(render(R"({"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
                      "reasoning_effort": "high", "model_identity": "You are a test model."})"),
            "<|start|>system<|message|>You are a test model.\nKnowledge cutoff: 2024-06\nCurrent date: 2025-08-05\n\n"
            "Reasoning: high\n\n# Valid channels: analysis, commentary, final. Channel must be included for every "
            "message.<|end|><|start|>developer<|message|># Instructions\n\nBe brief.\n\n<|end|>"
            "<|start|>user<|message|>Hi<|end|>");
}

TEST(HarmonyRendererTest, ToolNamespaceAsTypeScript) {
  const auto tools = nlohmann::ordered_json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "description": "Get the weather",
     "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "City name"},
        "unit": {"type": "string", "enum": ["c", "f"], "default": "c"},
        "days": {"type": "integer", "default": 1},
        "tags": {"type": "array", "items": {"type": "string"}}},
      "required": ["city"]}}},
    {"type": "function", "function": {"name": "now", "description": "Time", "parameters": {"type": "object", "properties": {}}}}])");
  EXPECT_EQ(render_harmony_tool_namespace(Value::from_json(tools)),
            "## functions\n\nnamespace functions {\n\n// Get the weather\ntype get_weather = (_: {\n// City name\n"
            "city: string,\nunit?: \"c\" | \"f\", // default: c,\ndays?: number, // default: 1,\ntags?: string[],\n"
            "}) => any;\n\n// Time\ntype now = () => any;\n\n} // namespace functions");
}

TEST(HarmonyRendererTest, NestedObjectAndOneOfQuirksOfTheHfTemplate) {
  const auto spec = nlohmann::ordered_json::parse(R"([{"function": {"name": "f", "description": "d", "parameters":
    {"properties": {"o": {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "number"}}, "required": ["a"]},
                    "u": {"oneOf": [{"type": "string", "description": "iso"}, {"type": "integer", "default": 3}]}}}}}])");
  EXPECT_EQ(render_harmony_tool_namespace(Value::from_json(spec)),
            "## functions\n\nnamespace functions {\n\n// d\ntype f = (_: {\no?: {\na: \n                string, b?: \n"
            "                number},\nu?: string// iso | \nnumber                    // default: 3,\n}) => any;\n\n"
            "} // namespace functions");
}

TEST(HarmonyRendererTest, ToolCallsResultsAndHistory) {
  const std::string out = render(R"({"messages": [
      {"role": "user", "content": "Weather?"},
      {"role": "assistant", "thinking": "Use the tool.", "tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
      {"role": "tool", "content": "sunny"}],
    "tools": [{"type": "function", "function": {"name": "get_weather", "description": "w"}}],
    "add_generation_prompt": true})");
  EXPECT_EQ(out, std::string(kSystem) +
                     "\nCalls to these tools must go to the commentary channel: 'functions'.<|end|>"
                     "<|start|>developer<|message|># Tools\n\n## functions\n\nnamespace functions {\n\n// w\n"
                     "type get_weather = () => any;\n\n} // namespace functions<|end|>"
                     "<|start|>user<|message|>Weather?<|end|>"
                     "<|start|>assistant<|channel|>analysis<|message|>Use the tool.<|end|>"
                     "<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{\"city\": "
                     "\"Paris\"}<|call|>"
                     "<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>\"sunny\"<|end|>"
                     "<|start|>assistant");
}

TEST(HarmonyRendererTest, FinalAnswersDropAnalysisUnlessLastTurnWithoutGenerationPrompt) {
  const char* conversation = R"({"messages": [{"role": "user", "content": "a"},
      {"role": "assistant", "content": "b", "thinking": "t1"}, {"role": "user", "content": "c"},
      {"role": "assistant", "content": "d", "thinking": "t2"}], "add_generation_prompt": false})";
  EXPECT_EQ(render(conversation), std::string(kSystem) +
                                      "<|end|><|start|>user<|message|>a<|end|>"
                                      "<|start|>assistant<|channel|>final<|message|>b<|end|>"
                                      "<|start|>user<|message|>c<|end|>"
                                      "<|start|>assistant<|channel|>analysis<|message|>t2<|end|>"
                                      "<|start|>assistant<|channel|>final<|message|>d<|return|>");
}

TEST(HarmonyRendererTest, RejectsWhatTheHfTemplateRejects) {
  EXPECT_THROW(render(R"({"messages": [{"role": "user", "content": "x"}, {"role": "tool", "content": "y"}]})"),
               TemplateRaised);
  EXPECT_THROW(render(R"({"messages": [{"role": "assistant", "content": "<|channel|>final<|message|>x"}]})"),
               TemplateRaised);
  EXPECT_THROW(render(R"({"messages": [{"role": "assistant", "content": "a", "thinking": "b",
                          "tool_calls": [{"name": "f", "arguments": {}}]}]})"),
               TemplateRaised);
  EXPECT_THROW(render(R"({"messages": []})"), TemplateError);
  EXPECT_THROW(render(R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "x"}]}]})"),
               TemplateError);
}

TEST(HarmonyRendererTest, NullContentAndToolsWithoutDescriptionAreAccepted) {
  const std::string out = render(R"({"messages": [{"role": "user", "content": "x"},
      {"role": "assistant", "content": null, "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}]}],
    "tools": [{"type": "function", "function": {"name": "f"}}]})");
  EXPECT_NE(out.find("type f = () => any;"), std::string::npos);
  EXPECT_NE(out.find("<|start|>assistant to=functions.f<|channel|>commentary json<|message|>\"{}\"<|call|>"),
            std::string::npos);
}

}  // namespace
}  // namespace rs::chat
