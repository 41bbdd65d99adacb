#include "memory/page_allocator.h"

#include "base/error.h"

namespace rs::memory {

PageAllocator::PageAllocator(int64_t num_pages) : ref_counts_(num_pages, 0) {
  RS_CHECK(num_pages > 0 && num_pages <= INT32_MAX, "page count {} out of range", num_pages);
  free_pages_.reserve(num_pages);
  for (int64_t page = num_pages - 1; page >= 0; --page) free_pages_.push_back(static_cast<int32_t>(page));
}

int32_t PageAllocator::allocate() {
  if (free_pages_.empty()) return -1;
  const int32_t page = free_pages_.back();
  free_pages_.pop_back();
  ref_counts_[page] = 1;
  return page;
}

void PageAllocator::ref(int32_t page) {
  RS_CHECK(page >= 0 && page < num_pages() && ref_counts_[page] > 0, "ref of page {} that is not in use", page);
  ++ref_counts_[page];
}

bool PageAllocator::unref(int32_t page) {
  RS_CHECK(page >= 0 && page < num_pages() && ref_counts_[page] > 0, "unref of page {} that is not in use", page);
  if (--ref_counts_[page] > 0) return false;
  free_pages_.push_back(page);
  return true;
}

}  // namespace rs::memory
