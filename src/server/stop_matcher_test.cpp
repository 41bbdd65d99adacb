#include "server/stop_matcher.h"

#include <gtest/gtest.h>

namespace rs::server {
namespace {

TEST(StopMatcher, PassesTextThroughWithoutStops) {
  StopMatcher matcher({});
  EXPECT_EQ(matcher.push("hello"), "hello");
  EXPECT_EQ(matcher.flush(), "");
}

TEST(StopMatcher, StopsAcrossPiecesAndHidesTheStopString) {
  StopMatcher matcher({"END", "\n\n"});
  EXPECT_EQ(matcher.push("abc E"), "abc ");  // "E" may start "END"
  EXPECT_EQ(matcher.push("N"), "");
  EXPECT_FALSE(matcher.stopped());
  EXPECT_EQ(matcher.matched(), "");
  EXPECT_EQ(matcher.push("Dxyz"), "");
  EXPECT_TRUE(matcher.stopped());
  EXPECT_EQ(matcher.matched(), "END");  // which one ended it (Anthropic's stop_sequence)
  EXPECT_EQ(matcher.push("more"), "");
  EXPECT_EQ(matcher.flush(), "");
}

TEST(StopMatcher, ReleasesHeldTextWhenItStopsMatching) {
  StopMatcher matcher({"END"});
  EXPECT_EQ(matcher.push("EN"), "");
  EXPECT_EQ(matcher.push("x"), "ENx");
  EXPECT_EQ(matcher.push("E"), "");
  EXPECT_EQ(matcher.flush(), "E");
}

TEST(StopMatcher, EarliestStopWins) {
  StopMatcher matcher({"bc", "a"});
  EXPECT_EQ(matcher.push("xxabc"), "xx");
}

TEST(StopMatcher, IncludeStopKeepsTheMatchedStringAndNothingAfter) {
  StopMatcher matcher({"END", "EN"}, /*include_stop=*/true);
  EXPECT_EQ(matcher.push("abc E"), "abc ");
  EXPECT_EQ(matcher.push("NDxyz"), "END");  // both match at the same place: the longer one is the stop
  EXPECT_TRUE(matcher.stopped());
  EXPECT_EQ(matcher.flush(), "");
}

}  // namespace
}  // namespace rs::server
