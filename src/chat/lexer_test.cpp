// Lexer: token kinds, positions, and jinja2's whitespace control (trim_blocks, lstrip_blocks, -/+ signs).
#include "chat/lexer.h"

#include <gtest/gtest.h>

namespace rs::chat {
namespace {

// Concatenated text tokens: what the template prints when it has no expressions.
std::string text_of(std::string_view source) {
  std::string out;
  for (const Token& token : tokenize(source)) {
    if (token.kind == TokenKind::kText) out += token.text;
  }
  return out;
}

TEST(LexerTest, SplitsTextAndTags) {
  const auto tokens = tokenize("a{{ x.y }}b{% if z %}");
  ASSERT_EQ(tokens.size(), 12u);
  EXPECT_EQ(tokens[0].kind, TokenKind::kText);
  EXPECT_EQ(tokens[1].kind, TokenKind::kVariableBegin);
  EXPECT_EQ(tokens[2].kind, TokenKind::kName);
  EXPECT_EQ(tokens[3].text, ".");
  EXPECT_EQ(tokens[5].kind, TokenKind::kVariableEnd);
  EXPECT_EQ(tokens[6].text, "b");
  EXPECT_EQ(tokens[7].kind, TokenKind::kBlockBegin);
  EXPECT_EQ(tokens[8].text, "if");
  EXPECT_EQ(tokens[10].kind, TokenKind::kBlockEnd);
  EXPECT_EQ(tokens[11].kind, TokenKind::kEnd);
}

TEST(LexerTest, TracksLineAndColumn) {
  const auto tokens = tokenize("ab\n  {{ héllo }}\n{% if x %}");
  EXPECT_EQ(tokens[1].pos.line, 2);
  EXPECT_EQ(tokens[1].pos.column, 3);
  EXPECT_EQ(tokens[2].text, "héllo");
  EXPECT_EQ(tokens[2].pos.column, 6);
  EXPECT_EQ(tokens[3].pos.column, 12);  // columns count code points
  EXPECT_EQ(tokens[5].pos.line, 3);
}

TEST(LexerTest, LiteralsAndOperators) {
  const auto tokens = tokenize(R"({{ 'a\n\'' "b" 12 1_000 3.5 1e3 // ** == != <= >= ~ }})");
  EXPECT_EQ(tokens[1].text, "a\n'");
  EXPECT_EQ(tokens[2].text, "b");
  EXPECT_EQ(tokens[3].integer, 12);
  EXPECT_EQ(tokens[4].integer, 1000);
  EXPECT_EQ(tokens[5].kind, TokenKind::kFloat);
  EXPECT_DOUBLE_EQ(tokens[5].number, 3.5);
  EXPECT_DOUBLE_EQ(tokens[6].number, 1000.0);
  for (size_t i = 7; i <= 13; ++i) EXPECT_EQ(tokens[i].kind, TokenKind::kOperator) << i;
  EXPECT_EQ(tokens[7].text, "//");
}

TEST(LexerTest, StringEscapesFollowPython) {
  const auto tokens = tokenize(R"({{ '\x41\u00e9\t\d' }})");
  EXPECT_EQ(tokens[1].text, "Aé\t\\d");
}

TEST(LexerTest, BracesInsideExpressionsDoNotEndTheTag) {
  const auto tokens = tokenize("{{ {'a': {'b': 1}} }}x");
  EXPECT_EQ(tokens.back().kind, TokenKind::kEnd);
  EXPECT_EQ(tokens[tokens.size() - 2].text, "x");
}

TEST(LexerTest, TrimBlocksDropsOneNewlineAfterBlockTags) {
  EXPECT_EQ(text_of("{% if x %}\n\nA{% endif %}\nB"), "\nAB");
  EXPECT_EQ(text_of("{# c #}\nA"), "A");
  EXPECT_EQ(text_of("{{ x }}\nA"), "\nA");  // not after variables
}

TEST(LexerTest, LstripBlocksDropsIndentationBeforeBlockTags) {
  EXPECT_EQ(text_of("A\n    {% if x %}B"), "A\nB");
  EXPECT_EQ(text_of("A  {% if x %}B"), "A  B");          // not at line start
  EXPECT_EQ(text_of("A\n  {{ x }}B"), "A\n  B");         // not before variables
  EXPECT_EQ(text_of("A\n  {%+ if x %}B"), "A\n  B");     // + disables it
  EXPECT_EQ(text_of("  {% if x %}B"), "B");              // template start counts as line start
  EXPECT_EQ(text_of("{% if x %}\n  {% if y %}B"), "B");  // after a trimmed newline
}

TEST(LexerTest, MinusSignsStripAllWhitespace) {
  EXPECT_EQ(text_of("A \n {%- if x -%} \n\n B"), "AB");
  EXPECT_EQ(text_of("A \n {{- x -}} \n B"), "AB");
  EXPECT_EQ(text_of("A \n {#- c -#} \n B"), "AB");
  EXPECT_EQ(text_of("{% if x +%}\nB"), "\nB");  // + keeps the newline trim_blocks would drop
}

TEST(LexerTest, NormalizesNewlinesAndDropsOneTrailingNewline) {
  EXPECT_EQ(text_of("a\r\nb\rc\n"), "a\nb\nc");
  EXPECT_EQ(text_of("a\n\n"), "a\n");
}

TEST(LexerTest, RawBlocksAreText) {
  EXPECT_EQ(text_of("{% raw %}{{ x }}{% endraw %}"), "{{ x }}");
  EXPECT_EQ(text_of("{%- raw -%}  {% y %}  {%- endraw %}!"), "{% y %}!");
}

TEST(LexerTest, ErrorsCarryPositions) {
  try {
    tokenize("ok\n  {{ 'open");
    FAIL() << "expected TemplateError";
  } catch (const TemplateError& error) {
    EXPECT_EQ(error.pos().line, 2);
    EXPECT_EQ(error.pos().column, 6);
  }
  EXPECT_THROW(tokenize("{{ x }"), TemplateError);
  EXPECT_THROW(tokenize("{{ (x ]}}"), TemplateError);
  EXPECT_THROW(tokenize("{# never closed"), TemplateError);
  EXPECT_THROW(tokenize("{{ x $ }}"), TemplateError);
}

}  // namespace
}  // namespace rs::chat
