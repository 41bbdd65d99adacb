#include "server/tool_call_parser.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

namespace rs::server {
namespace {

ToolCallParser::Output run(const std::string& text, size_t step) {
  ToolCallParser parser;
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

}  // namespace
}  // namespace rs::server
