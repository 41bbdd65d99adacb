#include "server/reasoning_parser.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace rs::server {
namespace {

struct Result {
  std::string reasoning, content;
};

// Feeds `text` in pieces of `step` bytes (0: whole), then finishes.
Result run(const std::string& text, bool starts_in_reasoning, size_t step) {
  ReasoningParser parser("<think>", "</think>", starts_in_reasoning);
  Result r;
  auto add = [&r](const ReasoningParser::Split& s) {
    r.reasoning += s.reasoning;
    r.content += s.content;
  };
  if (step == 0) step = text.size() + 1;
  for (size_t i = 0; i < text.size(); i += step) add(parser.feed(text.substr(i, step)));
  add(parser.finish());
  return r;
}

struct Case {
  std::string text;
  bool starts_in_reasoning;
  std::string reasoning, content;
};

TEST(ReasoningParser, SplitsTheSameWhateverThePieces) {
  const std::vector<Case> cases = {
      {"<think>\nLet me see.\n</think>\n\nThe answer is 4.", false, "\nLet me see.\n", "The answer is 4."},
      {"  \n<think>a</think>b", false, "a", "b"},                  // whitespace before the tag
      {"Let me see.\n</think>\n\n4", true, "Let me see.\n", "4"},  // the prompt opened the tag
      {"Plain answer, no thinking.", false, "", "Plain answer, no thinking."},
      {"An answer that mentions <think> later.", false, "", "An answer that mentions <think> later."},
      {"<think>cut off mid-thought", false, "cut off mid-thought", ""},  // max_tokens inside the reasoning
      {"<think>ends in a partial tag </thi", false, "ends in a partial tag </thi", ""},
      {"<think></think>", false, "", ""},
      {"<think>x</think>  ", false, "x", ""},
      {"<think>a < b and </ c</think>ok <think> stays", false, "a < b and </ c", "ok <think> stays"},
      {"<thin", false, "", "<thin"},  // never became a tag
      {"", false, "", ""},
      {"   ", false, "", "   "},
  };
  for (const Case& c : cases)
    for (size_t step : {0, 1, 2, 3, 5, 7}) {
      const Result r = run(c.text, c.starts_in_reasoning, step);
      EXPECT_EQ(r.reasoning, c.reasoning) << "'" << c.text << "' in pieces of " << step;
      EXPECT_EQ(r.content, c.content) << "'" << c.text << "' in pieces of " << step;
    }
}

TEST(ReasoningParser, ReleasesReasoningAsItStreams) {
  ReasoningParser parser("<think>", "</think>", false);
  EXPECT_EQ(parser.feed("<think>step one").reasoning, "step one");
  const auto held = parser.feed(", two</th");  // "</th" may still become the closing tag
  EXPECT_EQ(held.reasoning, ", two");
  const auto closed = parser.feed("ink>\nDone");
  EXPECT_EQ(closed.reasoning, "");
  EXPECT_EQ(closed.content, "Done");
}

}  // namespace
}  // namespace rs::server
