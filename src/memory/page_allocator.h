// PageAllocator: the free list and reference counts of one KV group's pages.
// Owned by the scheduler thread (no locks). A page is free exactly when its reference count is 0.
#pragma once

#include <cstdint>
#include <vector>

namespace rs::memory {

class PageAllocator {
 public:
  explicit PageAllocator(int64_t num_pages);

  int64_t num_pages() const { return static_cast<int64_t>(ref_counts_.size()); }
  int64_t num_free() const { return static_cast<int64_t>(free_pages_.size()); }
  int64_t num_used() const { return num_pages() - num_free(); }

  // Takes a free page and gives it one reference; -1 when none is free.
  int32_t allocate();
  // Adds a reference to a page in use.
  void ref(int32_t page);
  // Drops a reference; the page returns to the free list when none remain. Returns true when it did.
  bool unref(int32_t page);
  int32_t ref_count(int32_t page) const { return ref_counts_[page]; }

 private:
  std::vector<int32_t> free_pages_;  // a stack: the most recently freed page is reused first
  std::vector<int32_t> ref_counts_;  // [num_pages]
};

}  // namespace rs::memory
