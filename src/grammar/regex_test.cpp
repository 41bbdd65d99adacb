#include "grammar/regex.h"

#include <gtest/gtest.h>

#include "base/error.h"
#include "grammar/test_util.h"

namespace rs::grammar {
namespace {

bool fullmatch(const std::string& pattern, const std::string& text) {
  return testing::fullmatch(regex_rules(pattern), text);
}

TEST(Regex, FullmatchesTheCommonSubset) {
  struct Case {
    const char* pattern;
    const char* text;
    bool match;
  };
  const Case cases[] = {
      {"abc", "abc", true},
      {"abc", "abcd", false},
      {"^a+b?$", "aaa", true},
      {"a{2,3}", "a", false},
      {"a{2,3}", "aaa", true},
      {"a{2,3}", "aaaa", false},
      {"a{2,}", "aaaaaa", true},
      {"(ab|cd)*e", "abcdabe", true},
      {"(ab|cd)*e", "abce", false},
      {"(?:x|y){3}", "xyx", true},
      {"[A-Z][a-z]*", "Hello", true},
      {"[^0-9]+", "abc", true},
      {"[^0-9]+", "a1", false},
      {"\\d{3}-\\d{4}", "555-1234", true},
      {"\\w+@\\w+\\.com", "me@example.com", true},
      {"\\s*x\\s*", " \tx\n", true},
      {"[\\d.]+", "3.14", true},
      {"[-+]?\\d+", "-12", true},
      {"a.c",
       "a\xC3\xA9"
       "c",
       true},
      {"a.c", "a\nc", false},
      {"\\.", ".", true},
      {"\\.", "x", false},
      {"[a-c]+?x", "abcx", true},
      {"\\u00e9|\\x41", "A", true},
      {"caf\xC3\xA9", "caf\xC3\xA9", true},
      {"[\\w-]+", "a-b_c", true},
      {"[]a]+", "]a]", true},
      {"(a|)b", "b", true},
      {"(\\d{1,3}\\.){3}\\d{1,3}", "192.168.0.1", true},
      {"(a{0,10}b){0,100}", "aabab", true},  // nested, 1000 copies at most: allowed
  };
  for (const Case& c : cases) EXPECT_EQ(fullmatch(c.pattern, c.text), c.match) << c.pattern << " vs " << c.text;
}

TEST(Regex, UnsupportedFeaturesAreClearErrors) {
  const auto error_of = [](const std::string& pattern) -> std::string {
    try {
      parse_regex(pattern);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(error_of("(a)\\1"), "regex at line 1, column 4: backreferences are not supported");
  EXPECT_EQ(error_of("a(?=b)"), "regex at line 1, column 2: lookaround and named groups are not supported");
  EXPECT_EQ(error_of("\\bword"), "regex at line 1, column 1: word boundaries are not supported");
  EXPECT_EQ(error_of("(ab"), "regex at line 1, column 1: unclosed '('");
  EXPECT_EQ(error_of("ab)"), "regex at line 1, column 3: unbalanced ')'");
  EXPECT_EQ(error_of("*a"), "regex at line 1, column 1: nothing to repeat");
  EXPECT_EQ(error_of("[b-a]"), "regex at line 1, column 5: range out of order");
  EXPECT_EQ(error_of("a{3,1}"), "regex at line 1, column 2: repetition {m,n} with n < m");
  EXPECT_EQ(error_of("a^b"), "regex at line 1, column 2: anchors inside the pattern are not supported");
  EXPECT_EQ(error_of("(.{0,100}){20}"),
            "regex at line 1, column 11: grammar too complex: nested repetitions expand to 2000 copies (at most 1000)");
  EXPECT_EQ(error_of("((a{2,}){0,30}b){20}"),
            "regex at line 1, column 17: grammar too complex: nested repetitions expand to 1200 copies (at most 1000)");
}

}  // namespace
}  // namespace rs::grammar
