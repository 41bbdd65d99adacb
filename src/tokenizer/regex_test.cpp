// Oniguruma -> PCRE2 translation and find_all semantics.
#include "tokenizer/regex.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "base/error.h"

namespace rs::tokenizer {
namespace {

std::vector<std::string> matches_of(const std::string& pattern, std::string_view text) {
  std::vector<Match> matches;
  Regex(pattern).find_all(text, matches);
  std::vector<std::string> out;
  for (const Match& m : matches) out.emplace_back(text.substr(m.begin, m.end - m.begin));
  return out;
}

TEST(Regex, WhitespaceIsUnicodeWhiteSpace) {
  // Oniguruma: U+0085 is \s, U+180E (a format character since Unicode 6.3) and U+FEFF are not.
  EXPECT_EQ(matches_of(R"(\s)", "a\u0085b\u180ec\ufeffd\u3000").size(), 2u);
  EXPECT_EQ(matches_of(R"([^\s\p{L}]+)", "a\u180e\u0085").size(), 1u);
  EXPECT_EQ(matches_of(R"(\S+)", "ab\u180e cd"), (std::vector<std::string>{"ab\u180e", "cd"}));
}

TEST(Regex, TranslatesRubyEscapes) {
  EXPECT_EQ(translate_pattern(R"(\p{L}+|\d)"), R"(\p{L}+|\d)");
  EXPECT_EQ(matches_of(R"(\w+)", "e\u0301t\u00e9_1"), (std::vector<std::string>{"e\u0301t\u00e9_1"}));
  EXPECT_EQ(matches_of(R"(\h+)", "xx0aFz"), (std::vector<std::string>{"0aF"}));
  EXPECT_THROW(Regex(R"([\S])"), rs::Error);
  EXPECT_THROW(Regex(R"(\Qa\E)"), rs::Error);
  EXPECT_THROW(Regex("(unclosed"), rs::Error);
}

TEST(Regex, CaseInsensitiveContractionsFoldLongS) {
  // HF's Oniguruma matches (?i:'s) on "'\u017f" (long s folds to s); so does PCRE2.
  EXPECT_EQ(matches_of(R"((?i:'s|'t))", "'S '\u017f 'T"), (std::vector<std::string>{"'S", "'\u017f", "'T"}));
}

TEST(Regex, EmptyMatchesFollowOnigFindIter) {
  std::vector<Match> matches;
  Regex("x*").find_all("ab", matches);
  ASSERT_EQ(matches.size(), 3u);
  EXPECT_EQ(matches[1].begin, 1u);
  matches.clear();
  Regex("a*").find_all("baab", matches);  // (0,0) (1,3) then (4,4); (3,3) follows a match
  ASSERT_EQ(matches.size(), 3u);
  EXPECT_EQ(matches[1].end, 3u);
  EXPECT_EQ(matches[2].begin, 4u);
}

TEST(Regex, LiteralPattern) {
  std::vector<Match> matches;
  Pattern::from_json(nlohmann::json{{"String", "ab"}}).find_all("abxabab", matches);
  EXPECT_EQ(matches.size(), 3u);
  EXPECT_THROW(Pattern::from_json(nlohmann::json{{"Glob", "*"}}), rs::Error);
}

}  // namespace
}  // namespace rs::tokenizer
