// Jinja interpreter: statements, expressions, scoping and whitespace, with outputs jinja2 produces.
#include <gtest/gtest.h>

#include "base/error.h"
#include "chat/test_util.h"

namespace rs::chat {
namespace {

using testing::render;

TEST(TemplateTest, TextAndOutput) {
  EXPECT_EQ(render("Hello {{ name }}!", R"({"name": "Ada"})"), "Hello Ada!");
  EXPECT_EQ(render("{{ missing }}|{{ none }}|{{ true }}|{{ 1.0 }}|{{ [1, 'a', none] }}"),
            "|None|True|1.0|[1, 'a', None]");
  EXPECT_EQ(render("{{ {'k': \"v'\"} }} {{ (1, 'a') }} {{ (1,) }}"), "{'k': \"v'\"} (1, 'a') (1,)");
}

TEST(TemplateTest, IfElifElse) {
  const char* source = "{% if x > 1 %}big{% elif x == 1 %}one{% else %}small{% endif %}";
  EXPECT_EQ(render(source, R"({"x": 2})"), "big");
  EXPECT_EQ(render(source, R"({"x": 1})"), "one");
  EXPECT_EQ(render(source, R"({"x": 0})"), "small");
}

TEST(TemplateTest, ForLoopVariables) {
  EXPECT_EQ(render("{% for a in [1,2,3] if a > 1 %}{{ loop.index }}/{{ loop.length }}{{ loop.first }}{{ loop.last }}"
                   "{{ loop.previtem }}{{ loop.nextitem }};{% else %}E{% endfor %}"),
            "1/2TrueFalse3;2/2FalseTrue2;");
  EXPECT_EQ(render("{% for x in [7] %}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.index0 }}{{ loop.cycle('a','b') }}"
                   "{% endfor %}"),
            "100a");
  EXPECT_EQ(render("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(
      render("{% for x in [1,2] %}{% for y in 'ab' %}{{ loop.index }}{{ y }}{% endfor %}{{ loop.index }};{% endfor %}"),
      "1a2b1;1a2b2;");
}

TEST(TemplateTest, ForLoopUnpacksTuples) {
  EXPECT_EQ(render("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", R"({"d": {"b": 1, "a": 2}})"),
            "b=1;a=2;");
  EXPECT_EQ(render("{% for a, b in [[1, 2], [3, 4]] %}{{ a + b }}{% endfor %}"), "37");
  EXPECT_EQ(render("{% for k in {'x': 1, 'y': 2} %}{{ k }}{% endfor %}"), "xy");
}

TEST(TemplateTest, BreakAndContinue) {
  EXPECT_EQ(
      render("{% for i in range(5) %}{% if i == 1 %}{% continue %}{% endif %}{% if i == 3 %}{% break %}{% endif %}"
             "{{ i }}{% endfor %}"),
      "02");
}

TEST(TemplateTest, ScopingFollowsJinja2) {
  // A for-iteration is a scope: sets inside do not leak out, nor into the next iteration.
  EXPECT_EQ(render("{% set x = 1 %}{% for i in [1,2] %}{{ x }}{% set x = 2 %}{{ x }}{% endfor %}{{ x }}"), "12121");
  EXPECT_EQ(render("{% for i in [1,2] %}{% if i == 1 %}{% set x = 'a' %}{% endif %}[{{ x }}]{% endfor %}"), "[a][]");
  // if does not create a scope; with does.
  EXPECT_EQ(render("{% set x = 1 %}{% if true %}{% set x = 2 %}{% endif %}{{ x }}{% with %}{% set x = 3 %}{{ x }}"
                   "{% endwith %}{{ x }}"),
            "232");
  // namespace() is how templates carry state out of loops.
  EXPECT_EQ(
      render("{% set ns = namespace(n=0) %}{% for i in range(3) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}"),
      "3");
}

TEST(TemplateTest, SetForms) {
  EXPECT_EQ(render("{% set a, b = 1, 2 %}{{ a }}{{ b }}"), "12");
  EXPECT_EQ(render("{% set y %}blk{{ 1 }}{% endset %}{{ y }}"), "blk1");
  EXPECT_EQ(render("{% set body | upper %}hello {{ 'w' }}{% endset %}{{ body }}"), "HELLO W");
  EXPECT_EQ(render("{% set ns = namespace({'a': 1}, b=2) %}{{ ns.a }}{{ ns.b }}"), "12");
}

TEST(TemplateTest, Macros) {
  EXPECT_EQ(
      render(
          "{% macro m(a, b=2) %}{{ a }}{{ b }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1) }}|{{ m(1, 3, 4, z=5) }}"),
      "12(){}|13(4,){'z': 5}");
  EXPECT_EQ(render("{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * fact(n - 1)|int }}{% endif %}{% endmacro %}"
                   "{{ fact(5) }}"),
            "120");
  // Macros see template variables set after their definition (resolved at call time).
  EXPECT_EQ(render("{% macro m() %}{{ x }}{% endmacro %}{% set x = 1 %}{{ m() }}"), "1");
  EXPECT_EQ(render("{% macro m(v=none) %}{% if v is not defined or v is none %}dflt{% endif %}{% endmacro %}{{ m() }}"),
            "dflt");
}

TEST(TemplateTest, CallBlocksAndFilterBlocks) {
  EXPECT_EQ(render("{% macro m(a) %}[{{ caller(a) }}]{% endmacro %}{% call(x) m(5) %}got {{ x }}{% endcall %}"),
            "[got 5]");
  EXPECT_EQ(render("{% filter upper %}abc{{ 'd' }}{% endfilter %}"), "ABCD");
  EXPECT_EQ(render("{% generation %}gen{% endgeneration %}"), "gen");
}

TEST(TemplateTest, Operators) {
  EXPECT_EQ(render("{{ -2|abs }} {{ 2**3**2 }} {{ not 1 == 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 % -3 }}"),
            "2 64 True 3 -4 2 -2");
  EXPECT_EQ(render("{{ 'x' * 3 }} {{ [1] * 2 }} {{ 3 / 2 }} {{ 4 / 2 }} {{ '%s-%d' % ('a', 3) }} {{ true + true }}"),
            "xxx [1, 1] 1.5 2.0 a-3 2");
  EXPECT_EQ(render("{{ 'abc' ~ none ~ undef ~ 1 }}"), "abcNone1");
  EXPECT_EQ(render("{{ [1] + [2] }} {{ 'a' + 'b' }} {{ 1 + 2.5 }}"), "[1, 2] ab 3.5");
}

TEST(TemplateTest, ComparisonsAndMembership) {
  EXPECT_EQ(render("{{ 1 < 2 < 3 }} {{ 1 == 1.0 }} {{ 'a' == 1 }} {{ [1,2] < [1,3] }} {{ undef == undef }}"),
            "True True False True True");
  EXPECT_EQ(
      render("{{ 'a' in 'abc' }} {{ 1 in [1,2] }} {{ 'a' in {'a':1} }} {{ 'x' not in 'abc' }} {{ 'x' in undef }}"),
      "True True True True False");
}

TEST(TemplateTest, LogicAndConditionalExpressions) {
  EXPECT_EQ(render("{{ 0 or 'b' }} {{ 'a' and 'b' }} {{ none or [] }} {{ 'a' if false }}| {{ 1 if false else 2 if "
                   "false else 3 }}"),
            "b b [] | 3");
}

TEST(TemplateTest, AttributesSubscriptsAndSlices) {
  EXPECT_EQ(render("{{ 'abc'[1] }} {{ 'abc'[-1] }} {{ 'abcdef'[1:4] }} {{ 'abcdef'[::2] }} {{ [1,2,3,4][-2:] }}"),
            "b c bcd ace [3, 4]");
  EXPECT_EQ(render("{{ 'héllo'[1] }} {{ 'héllo'[::-1] }} {{ [1,2,3][::-1] }} {{ [1,2,3].0 }}"), "é olléh [3, 2, 1] 1");
  EXPECT_EQ(render("{{ m.role }}|{{ m['role'] }}|{{ m.missing }}|{{ l[5] }}|{{ none.x }}",
                   R"({"m": {"role": "user"}, "l": [1]})"),
            "user|user|||");
  // dict methods win over keys for attribute access, keys win for subscripts.
  EXPECT_EQ(render("{{ d['items'] }} {{ d.items() | list }}", R"({"d": {"items": 1}})"), "1 [('items', 1)]");
}

TEST(TemplateTest, WhitespaceControlMatchesTransformers) {
  EXPECT_EQ(render("  {% if true %}\n  x\n  {% endif %}\n  y {# c #}\nz"), "  x\n  y z");
  EXPECT_EQ(render("a  {%- if true -%}  b  {%- endif -%}  c"), "abc");
  EXPECT_EQ(render("{{ 'x' }}\n  {%+ if true %}q{% endif %}"), "x\n  q");
  EXPECT_EQ(render("{% for m in [1,2] %}\n  item {{ m }}\n{% endfor %}\ndone\n"), "  item 1\n  item 2\ndone");
  EXPECT_EQ(render("line1\n    {%- if true %}\n        {{ 'in' }}\n    {% endif -%}\nafter"), "line1        in\nafter");
}

TEST(TemplateTest, GlobalsRangeDictJoiner) {
  EXPECT_EQ(render("{{ range(3) | list }} {{ range(1, 10, 3) | list }} {{ dict(a=1) }} {{ namespace(a=1) }}"),
            "[0, 1, 2] [1, 4, 7] {'a': 1} <Namespace {'a': 1}>");
  EXPECT_EQ(render("{% set j = joiner(', ') %}{% for i in range(3) %}{{ j() }}{{ i }}{% endfor %}"), "0, 1, 2");
  EXPECT_EQ(render("{{ strftime_now('%Y-%m-%d %d %b %Y') }}"), "2025-08-05 05 Aug 2025");
}

// from_json recurses per level: past its limit it throws instead of overflowing the stack.
TEST(ValueTest, FromJsonRefusesDeepNesting) {
  auto nested = [](int levels) {
    nlohmann::ordered_json value = 1;
    for (int i = 0; i < levels; ++i) {
      nlohmann::ordered_json wrapper = nlohmann::ordered_json::array();
      wrapper.push_back(std::move(value));
      value = std::move(wrapper);
    }
    return value;
  };
  EXPECT_TRUE(Value::from_json(nested(100)).is_list());
  EXPECT_THROW(Value::from_json(nested(1000)), rs::Error);
}

}  // namespace
}  // namespace rs::chat
