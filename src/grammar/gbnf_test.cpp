#include "grammar/gbnf.h"

#include <gtest/gtest.h>

#include "base/error.h"
#include "grammar/test_util.h"

namespace rs::grammar {
namespace {

using testing::fullmatch;

std::string error_of(const std::string& text) {
  try {
    parse_gbnf(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Gbnf, ParsesRulesAcrossLinesWithComments) {
  const RuleSet rules = parse_gbnf(R"(# a greeting
root ::= greeting
  ( ", " name )?   # optional name
  "!"
greeting ::= "hello" | 'hi'
name ::= [A-Z] [a-z]*
)");
  EXPECT_TRUE(fullmatch(rules, "hello!"));
  EXPECT_TRUE(fullmatch(rules, "hi, Ann!"));
  EXPECT_FALSE(fullmatch(rules, "hi, ann!"));
}

TEST(Gbnf, EscapesAndRepetitionCounts) {
  const RuleSet rules = parse_gbnf(R"(root ::= "\"" [\x41-\x43]{2} "\u00e9" "\\" "\n" [0-9]{1,} "."{0,2})");
  EXPECT_TRUE(fullmatch(rules, "\"AB\xC3\xA9\\\n7"));
  EXPECT_TRUE(fullmatch(rules, "\"CC\xC3\xA9\\\n123.."));
  EXPECT_FALSE(fullmatch(rules, "\"CC\xC3\xA9\\\n123..."));
  EXPECT_FALSE(fullmatch(rules, "\"AD\xC3\xA9\\\n7"));
}

TEST(Gbnf, AnyCharacterDot) {
  const RuleSet rules = parse_gbnf(R"(root ::= "<" . ">")");
  EXPECT_TRUE(fullmatch(rules, "<x>"));
  EXPECT_TRUE(fullmatch(rules, "<\xE2\x82\xAC>"));
  EXPECT_FALSE(fullmatch(rules, "<>"));
}

TEST(Gbnf, ErrorsNameLineAndColumn) {
  EXPECT_EQ(error_of("root ::= \"abc"), "grammar at line 1, column 10: unterminated string literal");
  EXPECT_EQ(error_of("root ::= a\nb ::= (\"x\""), "grammar at line 2, column 7: unclosed '('");
  EXPECT_EQ(error_of("root ::= [z-a]"), "grammar at line 1, column 14: character range out of order");
  EXPECT_EQ(error_of("root = \"a\""), "grammar at line 1, column 6: expected '::=' after rule name 'root'");
  EXPECT_EQ(error_of("start ::= \"a\""), "grammar at line 1, column 14: the grammar has no 'root' rule");
  EXPECT_EQ(error_of("root ::= \"a\"{3,1}"), "grammar at line 1, column 13: repetition {m,n} with n < m");
  EXPECT_EQ(error_of("root ::= \"\\q\""), "grammar at line 1, column 11: unknown escape \\q");
}

}  // namespace
}  // namespace rs::grammar
