// Interpreter errors: syntax and runtime errors carry line and column; raise_exception is TemplateRaised;
// the immutable sandbox refuses mutating methods.
#include "chat/template_error.h"

#include <gtest/gtest.h>

#include "chat/test_util.h"

namespace rs::chat {
namespace {

using testing::render;

// Position of the TemplateError that rendering `source` throws.
SourcePos error_pos(std::string_view source, std::string_view variables = "{}") {
  try {
    render(source, variables);
  } catch (const TemplateError& error) {
    return error.pos();
  }
  ADD_FAILURE() << "no TemplateError for: " << source;
  return {};
}

std::string error_message(std::string_view source, std::string_view variables = "{}") {
  try {
    render(source, variables);
  } catch (const TemplateError& error) {
    return error.detail();
  }
  ADD_FAILURE() << "no TemplateError for: " << source;
  return "";
}

TEST(TemplateErrorTest, SyntaxErrorsHaveLineAndColumn) {
  const SourcePos unclosed = error_pos("line one\n{% if true %}x");
  EXPECT_EQ(unclosed.line, 2);
  const SourcePos bad_expression = error_pos("a\nb\n  {{ 1 + }}");
  EXPECT_EQ(bad_expression.line, 3);
  EXPECT_EQ(bad_expression.column, 10);
  EXPECT_EQ(error_pos("{% for %}").column, 8);
  EXPECT_EQ(error_pos("{% endfor %}").line, 1);
  EXPECT_EQ(error_pos("{{ a b }}").column, 6);
  EXPECT_EQ(error_pos("{% include 'x' %}").column, 4);
}

TEST(TemplateErrorTest, ErrorMessageStartsWithPosition) {
  try {
    render("\n\n   {{ x | nosuchfilter }}");
    FAIL();
  } catch (const TemplateError& error) {
    EXPECT_STREQ(error.what(), "template:3:11: No filter named 'nosuchfilter'.");
  }
}

TEST(TemplateErrorTest, UnknownFiltersAndTestsFailWhenRendered) {
  EXPECT_EQ(render("{% if false %}{{ x | nosuchfilter }}{% endif %}ok"), "ok");
  EXPECT_EQ(error_message("{{ x | nosuchfilter }}"), "No filter named 'nosuchfilter'.");
  EXPECT_EQ(error_message("{% if x is nosuchtest %}{% endif %}"), "No test named 'nosuchtest' found.");
}

TEST(TemplateErrorTest, UndefinedValuesFailWhenUsed) {
  EXPECT_EQ(error_message("{{ undef + 1 }}"), "'undef' is undefined");
  EXPECT_EQ(error_message("{{ undef.x }}"), "'undef' is undefined");
  EXPECT_EQ(error_message("{{ foo() }}"), "'foo' is undefined");
  EXPECT_EQ(render("[{{ d.a.b }}]", R"({"d": {"a": 1}})"), "[]");  // printing an undefined value is fine
  EXPECT_EQ(error_message("{{ d.a.b.c }}", R"({"d": {"a": 1}})"), "'int object' has no attribute 'b'");
  const SourcePos pos =
      error_pos("{% for m in messages %}\n  {{ m.content.strip() }}{% endfor %}", R"({"messages": [{}]})");
  EXPECT_EQ(pos.line, 2);
}

TEST(TemplateErrorTest, PythonTypeErrors) {
  EXPECT_EQ(error_message("{{ 'a' + 1 }}"), "can only concatenate str (not \"int\") to str");
  EXPECT_EQ(error_message("{{ 1 + 'a' }}"), "unsupported operand type(s) for +: 'int' and 'str'");
  EXPECT_EQ(error_message("{{ 1 in 'abc' }}"), "'in <string>' requires string as left operand, not int");
  EXPECT_EQ(error_message("{{ 'a' in none }}"), "argument of type 'NoneType' is not iterable");
  EXPECT_EQ(error_message("{{ 'a'() }}"), "'str' object is not callable");
  EXPECT_EQ(error_message("{{ 'a' < 1 }}"), "'<' not supported between instances of 'str' and 'int'");
  EXPECT_EQ(error_message("{% for x in none %}{% endfor %}"), "'NoneType' object is not iterable");
  EXPECT_EQ(error_message("{% set x = 1 %}{% set x.a = 2 %}"), "cannot assign attribute on non-namespace object");
  EXPECT_EQ(error_message("{{ 2 ** 70 }}"), "integer overflow: the template interpreter's integers are 64-bit");
}

TEST(TemplateErrorTest, SandboxRefusesMutation) {
  EXPECT_EQ(error_message("{% set l = [1] %}{% set _ = l.append(2) %}"),
            "access to attribute 'append' of 'list' object is unsafe.");
  EXPECT_EQ(error_message("{{ {'a': 1}.update({}) }}"), "access to attribute 'update' of 'dict' object is unsafe.");
  EXPECT_EQ(render("{{ range(3) | length }}"), "3");
  EXPECT_THROW(render("{{ range(100001) | length }}"), TemplateError);
}

TEST(TemplateErrorTest, RaiseExceptionIsTemplateRaised) {
  try {
    render("ok\n{% if true %}{{ raise_exception('Conversation roles must alternate') }}{% endif %}");
    FAIL();
  } catch (const TemplateRaised& raised) {
    EXPECT_STREQ(raised.what(), "Conversation roles must alternate");
    EXPECT_EQ(raised.pos().line, 2);
  }
  // Raised inside a macro: still TemplateRaised, not wrapped.
  EXPECT_THROW(render("{% macro m() %}{{ raise_exception('no') }}{% endmacro %}{{ m() }}"), TemplateRaised);
}

TEST(TemplateErrorTest, RunawayRecursionIsAnError) {
  EXPECT_THROW(render("{% macro m() %}{{ m() }}{% endmacro %}{{ m() }}"), TemplateError);
  EXPECT_EQ(error_message("{% set ns = namespace(a=1) %}{% set ns.me = [ns] %}"),
            "cannot store a namespace inside itself");
  EXPECT_EQ(error_message("{% set a = namespace() %}{% set b = namespace(x=a) %}{% set a.y = b %}"),
            "cannot store a namespace inside itself");
  EXPECT_EQ(render("{% set a = namespace(v=1) %}{% set b = namespace() %}{% set b.a = a %}{{ b.a.v }}"), "1");
}

}  // namespace
}  // namespace rs::chat
