// UTF-8 validation, lossy repair and incomplete-tail detection.
#include "base/utf8.h"

#include <gtest/gtest.h>

namespace rs::utf8 {
namespace {

TEST(Utf8, FirstInvalid) {
  EXPECT_EQ(first_invalid("plain ascii"), std::string_view::npos);
  EXPECT_EQ(first_invalid("h\xC3\xA9llo \xF0\x9F\x98\x80"), std::string_view::npos);
  EXPECT_EQ(first_invalid("ab\xFF"), 2u);
  EXPECT_EQ(first_invalid("\xC0\xAF"), 0u);          // overlong
  EXPECT_EQ(first_invalid("x\xED\xA0\x80"), 1u);     // surrogate
  EXPECT_EQ(first_invalid("\xE4\xBD"), 0u);          // truncated
  EXPECT_EQ(first_invalid("\xF4\x90\x80\x80"), 0u);  // above U+10FFFF
}

TEST(Utf8, LossyReplacesMaximalSubparts) {
  const std::string fffd = "\xEF\xBF\xBD";
  EXPECT_EQ(to_lossy("ok"), "ok");
  EXPECT_EQ(to_lossy("\xE4\xBD"), fffd);  // one truncated sequence
  EXPECT_EQ(to_lossy("\xE4\xBD"
                     "A"),
            fffd + "A");
  EXPECT_EQ(to_lossy("\xF0\x80\x80"), fffd + fffd + fffd);  // F0 80: 80 is not allowed
  EXPECT_EQ(to_lossy("\xFF\xFE"), fffd + fffd);
  EXPECT_EQ(to_lossy("\xED\xA0\x80"), fffd + fffd + fffd);  // surrogates are 3 subparts
  EXPECT_EQ(to_lossy("a\xC3\xA9\x80z"), "a\xC3\xA9" + fffd + "z");
}

TEST(Utf8, IncompleteTail) {
  EXPECT_EQ(incomplete_tail(""), 0u);
  EXPECT_EQ(incomplete_tail("abc"), 0u);
  EXPECT_EQ(incomplete_tail("a\xE4"), 1u);
  EXPECT_EQ(incomplete_tail("a\xE4\xBD"), 2u);
  EXPECT_EQ(incomplete_tail("a\xE4\xBD\xA0"), 0u);
  EXPECT_EQ(incomplete_tail("\xF0\x9F\x98"), 3u);
  EXPECT_EQ(incomplete_tail("\xF0\x80"), 0u);  // can never complete: final
  EXPECT_EQ(incomplete_tail("\xFF"), 0u);
  EXPECT_EQ(incomplete_tail("\x80\x80\x80"), 0u);
}

}  // namespace
}  // namespace rs::utf8
