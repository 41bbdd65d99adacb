#include "server/tool_call_parser.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

namespace rs::server {
namespace {

ToolCallParser::Output run(const std::string& text, size_t step, ToolCallFormat format = ToolCallFormat::kHermes,
                           const nlohmann::ordered_json* tools = nullptr) {
  ToolCallParser parser(format, tools);
  ToolCallParser::Output all;
  auto add = [&all](ToolCallParser::Output o) {
    all.content += o.content;
    for (auto& c : o.calls) all.calls.push_back(std::move(c));
  };
  if (step == 0) step = text.size() + 1;
  for (size_t i = 0; i < text.size(); i += step) add(parser.feed(text.substr(i, step)));
  add(parser.finish());
  return all;
}

TEST(ToolCallParser, ExtractsCallsWhateverThePieces) {
  const std::string text =
      "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\", \"days\": 2}}\n"
      "</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";
  for (size_t step : {0, 1, 2, 3, 7, 13}) {
    const auto out = run(text, step);
    ASSERT_EQ(out.calls.size(), 2u) << step;
    EXPECT_EQ(out.calls[0].name, "get_weather");
    EXPECT_EQ(nlohmann::json::parse(out.calls[0].arguments), nlohmann::json({{"city", "Oslo"}, {"days", 2}}));
    EXPECT_EQ(out.calls[1].name, "get_time");
    EXPECT_EQ(out.calls[1].arguments, "{}");
    EXPECT_EQ(out.content, "Let me check.\n\n") << step;
  }
}

TEST(ToolCallParser, InvalidOrUnfinishedCallsStayText) {
  for (size_t step : {0, 1, 5}) {
    EXPECT_EQ(run("<tool_call>not json</tool_call> ok", step).content, "<tool_call>not json</tool_call> ok");
    EXPECT_TRUE(run("<tool_call>{\"arguments\": {}}</tool_call>", step).calls.empty());  // no name
    const auto cut = run("text <tool_call>{\"name\": \"f\", \"argu", step);              // max_tokens
    EXPECT_TRUE(cut.calls.empty());
    EXPECT_EQ(cut.content, "text <tool_call>{\"name\": \"f\", \"argu");
    EXPECT_EQ(run("a <tool_ca", step).content, "a <tool_ca");
  }
}

TEST(ToolCallParser, StringArgumentsPassThrough) {
  const auto out = run("<tool_call>{\"name\": \"f\", \"arguments\": \"{\\\"x\\\": 1}\"}</tool_call>", 0);
  ASSERT_EQ(out.calls.size(), 1u);
  EXPECT_EQ(out.calls[0].arguments, "{\"x\": 1}");
}

TEST(ToolCallParser, Qwen3CoderXmlTypedByTheToolSchema) {
  const auto tools = nlohmann::ordered_json::parse(R"([{"type": "function", "function": {"name": "get_weather",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"},
      "zip": {"type": "string"}, "opts": {"type": "object"}, "metric": {"type": ["boolean", "null"]}}}}}])");
  const std::string text =
      "Checking.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nNew York\n</parameter>\n<parameter=days>\n3\n"
      "</parameter>\n<parameter=zip>\n10001\n</parameter>\n<parameter=opts>\n{\"a\": [1, 2]}\n</parameter>\n"
      "<parameter=metric>\ntrue\n</parameter>\n<parameter=note>\nline one\nline two\n</parameter>\n</function>\n"
      "</tool_call>";
  for (size_t step : {0, 1, 4, 11}) {
    const auto out = run(text, step, ToolCallFormat::kQwen3Coder, &tools);
    ASSERT_EQ(out.calls.size(), 1u) << step;
    EXPECT_EQ(out.calls[0].name, "get_weather");
    EXPECT_EQ(nlohmann::json::parse(out.calls[0].arguments),
              nlohmann::json::parse(R"({"city": "New York", "days": 3, "zip": "10001", "opts": {"a": [1, 2]},
                                        "metric": true, "note": "line one\nline two"})"));
    EXPECT_EQ(out.content, "Checking.\n") << step;
  }
  // Not the XML form: the block stays text.
  const auto bad = run("<tool_call>\n{\"name\": \"x\"}\n</tool_call>", 0, ToolCallFormat::kQwen3Coder);
  EXPECT_TRUE(bad.calls.empty());
  EXPECT_EQ(bad.content, "<tool_call>\n{\"name\": \"x\"}\n</tool_call>");
}

TEST(ToolCallParser, Llama3JsonReplies) {
  for (size_t step : {0, 1, 3}) {
    auto out =
        run("<|python_tag|>{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}; "
            "{\"name\": \"get_time\", \"parameters\": {\"tz\": \"a;b\"}}",
            step, ToolCallFormat::kLlama3Json);
    ASSERT_EQ(out.calls.size(), 2u) << step;
    EXPECT_EQ(nlohmann::json::parse(out.calls[0].arguments), nlohmann::json({{"city", "Oslo"}}));
    EXPECT_EQ(out.calls[1].name, "get_time");
    EXPECT_EQ(nlohmann::json::parse(out.calls[1].arguments), nlohmann::json({{"tz", "a;b"}}));
    EXPECT_EQ(out.content, "");
    out = run("  {\"name\": \"f\", \"arguments\": {}}", step, ToolCallFormat::kLlama3Json);
    ASSERT_EQ(out.calls.size(), 1u);
    // Prose, and JSON that is not a call, are content, whole.
    out = run("The answer is {42}.", step, ToolCallFormat::kLlama3Json);
    EXPECT_TRUE(out.calls.empty());
    EXPECT_EQ(out.content, "The answer is {42}.");
    out = run("{\"answer\": 42}", step, ToolCallFormat::kLlama3Json);
    EXPECT_TRUE(out.calls.empty());
    EXPECT_EQ(out.content, "{\"answer\": 42}");
  }
}

TEST(ToolCallParser, MistralArraysAndArgsForms) {
  for (size_t step : {0, 1, 5}) {
    auto out = run("[TOOL_CALLS][{\"name\": \"a\", \"arguments\": {\"x\": 1}}, {\"name\": \"b\", \"arguments\": {}}]",
                   step, ToolCallFormat::kMistral);
    ASSERT_EQ(out.calls.size(), 2u) << step;
    EXPECT_EQ(out.calls[1].name, "b");
    out = run("[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Oslo\"}[TOOL_CALLS]get_time[ARGS]{}", step,
              ToolCallFormat::kMistral);
    ASSERT_EQ(out.calls.size(), 2u) << step;
    EXPECT_EQ(nlohmann::json::parse(out.calls[0].arguments), nlohmann::json({{"city", "Oslo"}}));
    // Without the marker (skipped as a special token) the array form still reads; prose stays content.
    out = run("[{\"name\": \"a\", \"arguments\": {}}]", step, ToolCallFormat::kMistral);
    EXPECT_EQ(out.calls.size(), 1u);
    out = run("[1] is a citation.", step, ToolCallFormat::kMistral);
    EXPECT_TRUE(out.calls.empty());
    EXPECT_EQ(out.content, "[1] is a citation.");
  }
}

TEST(ToolCallParser, FormatsByNameAndFromTemplates) {
  EXPECT_EQ(tool_call_format_named("qwen3"), ToolCallFormat::kHermes);
  EXPECT_EQ(tool_call_format_named("hermes"), ToolCallFormat::kHermes);
  EXPECT_EQ(tool_call_format_named("qwen3_coder"), ToolCallFormat::kQwen3Coder);
  EXPECT_EQ(tool_call_format_named("llama3_json"), ToolCallFormat::kLlama3Json);
  EXPECT_EQ(tool_call_format_named("mistral"), ToolCallFormat::kMistral);
  EXPECT_FALSE(tool_call_format_named("pythonic").has_value());
  EXPECT_EQ(tool_call_format_of_template("{{ '<tool_call>\\n<function=' }}"), ToolCallFormat::kQwen3Coder);
  EXPECT_EQ(tool_call_format_of_template("<tool_call>{{ tool | tojson }}</tool_call>"), ToolCallFormat::kHermes);
  EXPECT_EQ(tool_call_format_of_template("{{ '[TOOL_CALLS]' }}"), ToolCallFormat::kMistral);
  EXPECT_EQ(tool_call_format_of_template("<|start_header_id|>ipython<|end_header_id|>"), ToolCallFormat::kLlama3Json);
  EXPECT_FALSE(tool_call_format_of_template("{{ messages }}").has_value());
}

}  // namespace
}  // namespace rs::server
