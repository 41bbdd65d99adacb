#include "memory/page_allocator.h"

#include <gtest/gtest.h>

#include <set>

#include "base/error.h"

namespace rs::memory {
namespace {

TEST(PageAllocator, AllocatesEveryPageOnceThenRunsOut) {
  PageAllocator allocator(4);
  std::set<int32_t> pages;
  for (int i = 0; i < 4; ++i) pages.insert(allocator.allocate());
  EXPECT_EQ(pages, (std::set<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(allocator.allocate(), -1);
  EXPECT_EQ(allocator.num_free(), 0);
  EXPECT_EQ(allocator.num_used(), 4);
}

TEST(PageAllocator, PageReturnsWhenLastReferenceDrops) {
  PageAllocator allocator(2);
  const int32_t page = allocator.allocate();
  allocator.ref(page);
  EXPECT_EQ(allocator.ref_count(page), 2);
  EXPECT_FALSE(allocator.unref(page));
  EXPECT_EQ(allocator.num_free(), 1);
  EXPECT_TRUE(allocator.unref(page));
  EXPECT_EQ(allocator.num_free(), 2);
  EXPECT_EQ(allocator.allocate(), page);  // most recently freed first
}

TEST(PageAllocator, RejectsReferencesToFreePages) {
  PageAllocator allocator(2);
  EXPECT_THROW(allocator.ref(0), Error);
  EXPECT_THROW(allocator.unref(1), Error);
  EXPECT_THROW(allocator.ref(7), Error);
}

}  // namespace
}  // namespace rs::memory
