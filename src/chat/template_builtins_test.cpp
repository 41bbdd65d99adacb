// Jinja builtins: filters (tojson as transformers defines it), tests, and Python str/dict/list methods.
#include <gtest/gtest.h>

#include "chat/test_util.h"

namespace rs::chat {
namespace {

using testing::render;

TEST(TemplateBuiltinsTest, TojsonIsJsonDumpsWithoutAsciiEscaping) {
  EXPECT_EQ(render("{{ x | tojson }}", R"({"x": {"b": [1, 2.5, null, true], "a": "é\n\""}})"),
            R"({"b": [1, 2.5, null, true], "a": "é\n\""})");
  EXPECT_EQ(render("{{ {'a': [1, {'b': 2.50}]} | tojson(indent=2) }}"),
            "{\n  \"a\": [\n    1,\n    {\n      \"b\": 2.5\n    }\n  ]\n}");
  EXPECT_EQ(
      render("{{ {'b':1,'a':[]} | tojson(sort_keys=true) }} {{ {'a':1,'b':[1,2]} | tojson(separators=(',', ':')) }}"),
      R"({"a": [], "b": 1} {"a":1,"b":[1,2]})");
  EXPECT_EQ(render("{{ 'é' | tojson(ensure_ascii=true) }}"), R"("\u00e9")");
}

TEST(TemplateBuiltinsTest, StringFilters) {
  EXPECT_EQ(render("{{ '  a b  ' | trim }}|{{ 'xxaxx' | trim('x') }}|{{ 'Hi' | upper }}{{ 'Hi' | lower }}"),
            "a b|a|HIhi");
  EXPECT_EQ(render("{{ 'hello world-foo(bar' | title }} {{ 'hELLO' | capitalize }} {{ 'a-b' | replace('-', '+') }}"),
            "Hello World-Foo(Bar Hello a+b");
  EXPECT_EQ(render("{{ \"a\\nb\\n\" | indent(2) }}|{{ \"a\\nb\" | indent(2, true) }}|{{ \"a\\n\\nb\" | indent(2, "
                   "blank=true) }}"),
            "a\n  b\n|  a\n  b|a\n  \n  b");
  EXPECT_EQ(render("{{ '<a href=\"x\">&' | escape }} {{ 'a b c' | wordcount }} {{ 'ab' | center(6) }}|"),
            "&lt;a href=&#34;x&#34;&gt;&amp; 3   ab  |");
  EXPECT_EQ(render("{{ '%s=%s' | format('k', 1) }} {{ 42 | string }} {{ none | string }}"), "k=1 42 None");
}

TEST(TemplateBuiltinsTest, NumberFilters) {
  EXPECT_EQ(render("{{ 5 | round }} {{ 2.5 | round }} {{ 3.14159 | round(2) }} {{ 2.5 | round(0, 'floor') }}"),
            "5 2.0 3.14 2.0");
  EXPECT_EQ(
      render("{{ 2.5|int }} {{ '42'|int }} {{ 'x'|int }} {{ '0x1A'|int(0, 16) }} {{ '3.5'|float }} {{ 3|float }}"),
      "2 42 0 26 3.5 3.0");
  EXPECT_EQ(render("{{ -3 | abs }} {{ [1, 2] | sum }} {{ [3, 1] | min }} {{ [3, 1] | max }}"), "3 3 1 3");
}

TEST(TemplateBuiltinsTest, DefaultAndLength) {
  EXPECT_EQ(
      render("{{ 'x' | default('d') }} {{ undef | default('d') }} {{ '' | default('d', true) }} {{ none | d('z') }}"),
      "x d d None");
  EXPECT_EQ(render("{{ 'héé' | length }} {{ undef | length }} {{ [1, 2] | count }} {{ {'a': 1} | length }}"),
            "3 0 2 1");
}

TEST(TemplateBuiltinsTest, SequenceFilters) {
  EXPECT_EQ(
      render("{{ [1,2,3] | first }} {{ [1,2,3] | last }} {{ [] | first }} {{ 'abc' | list }} {{ {'a': 1} | list }}"),
      "1 3  ['a', 'b', 'c'] ['a']");
  EXPECT_EQ(render("{{ [3,1,2] | sort }} {{ ['b','A','a'] | sort }} {{ ['b','A','a'] | unique | list }} {{ [1,2] | "
                   "reverse | list }}"),
            "[1, 2, 3] ['A', 'a', 'b'] ['b', 'A'] [2, 1]");
  EXPECT_EQ(
      render("{{ {'b':1,'a':2} | dictsort }} {{ {'b':1,'a':2} | items | list }} {{ range(5) | batch(2) | list }}"),
      "[('a', 2), ('b', 1)] [('b', 1), ('a', 2)] [[0, 1], [2, 3], [4]]");
  EXPECT_EQ(render("{{ [1,2,3] | join(', ') }} {{ [{'a':1},{'a':2}] | map(attribute='a') | join }} {{ ['a'] | "
                   "map('upper') | list }}"),
            "1, 2, 3 12 ['A']");
  EXPECT_EQ(
      render("{{ [1,2,3,4] | select('odd') | list }} {{ [1,2,3,4] | reject('odd') | list }} "
             "{{ [{'a':1,'b':'x'},{'a':2,'b':'y'}] | selectattr('a', 'equalto', 1) | map(attribute='b') | join }} "
             "{{ [{'a':1},{'b':2}] | rejectattr('a') | list }}"),
      "[1, 3] [2, 4] x [{'b': 2}]");
}

TEST(TemplateBuiltinsTest, Tests) {
  EXPECT_EQ(render("{{ 3 is odd }}{{ 4 is even }}{{ 9 is divisibleby 3 }}{{ 1 is number }}{{ true is number }}"
                   "{{ true is integer }}{{ 1.0 is float }}{{ 'a' is string }}{{ {} is mapping }}{{ 'a' is iterable }}"
                   "{{ 1 is iterable }}{{ [] is sequence }}{{ true is boolean }}{{ none is none }}{{ true is true }}"
                   "{{ 0 is false }}{{ 2 is equalto 2 }}{{ 2 is eq 2 }}{{ 1 is in [1] }}{{ 'ab' is lower }}"),
            "TrueTrueTrueTrueTrueFalseTrueTrueTrueTrueFalseTrueTrueTrueTrueFalseTrueTrueTrueTrue");
  EXPECT_EQ(render("{{ x is defined }}{{ x is undefined }}{{ y is not none }}{{ none is sameas none }}", R"({"y": 1})"),
            "FalseTrueTrueTrue");
}

TEST(TemplateBuiltinsTest, StringMethods) {
  EXPECT_EQ(
      render(
          "{{ '  a b  '.split() }} {{ 'a,b,,c'.split(',') }} {{ 'a,b,c'.split(',', 1) }} {{ 'a.b.c'.rsplit('.', 1) }}"),
      "['a', 'b'] ['a', 'b', '', 'c'] ['a', 'b,c'] ['a.b', 'c']");
  EXPECT_EQ(render("{{ 'xxhixx'.strip('x') }}|{{ ' a '.lstrip() }}|{{ ' a '.rstrip() }}|{{ '\\na\\n'.strip('\\n') }}"),
            "hi|a | a|a");
  EXPECT_EQ(
      render("{{ 'abc'.startswith(('x','a')) }}{{ 'abc'.endswith('bc') }}{{ 'abcb'.find('b') }}{{ 'abcb'.rfind('b') }}"
             "{{ 'abcb'.count('b') }}{{ '-'.join(['a','b']) }}{{ 'a-b'.replace('-', '+') }}"),
      "TrueTrue132a-ba+b");
  EXPECT_EQ(render("{{ 'hello wORLD'.title() }} {{ 'ÉCOLE'.lower() }} {{ 'straße'.upper() }} {{ '{} and {n}'.format(1, "
                   "n='x') }}"),
            "Hello World école STRASSE 1 and x");
  EXPECT_EQ(render("{{ 'a\\nb\\r\\nc'.splitlines() }} {{ '12'.isdigit() }} {{ 'ab'.isalpha() }} {{ ' '.isspace() }}"),
            "['a', 'b', 'c'] True True True");
}

TEST(TemplateBuiltinsTest, DictAndListMethods) {
  EXPECT_EQ(render("{{ d.get('a') }}{{ d.get('z') }}{{ d.get('z', 5) }}{{ d.keys() | list }}{{ d.values() | list }}",
                   R"({"d": {"a": 1}})"),
            "1None5['a'][1]");
  EXPECT_EQ(render("{{ [1, 2, 1].count(1) }} {{ [1, 2].index(2) }}"), "2 1");
}

}  // namespace
}  // namespace rs::chat
