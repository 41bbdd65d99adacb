#include "base/error.h"

#include <gtest/gtest.h>

namespace rs {
namespace {

// Users and API clients see the message alone; the failing check's file:line is kept for debug logs.
TEST(Error, MessageWithoutLocationLocationBeside) {
  try {
    RS_CHECK(1 + 1 == 3, "arithmetic is {}", "broken");
    FAIL() << "RS_CHECK did not throw";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "arithmetic is broken");
    EXPECT_EQ(e.location().rfind("error_test.cpp:", 0), 0u) << e.location();
  }
}

}  // namespace
}  // namespace rs
