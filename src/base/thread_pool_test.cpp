#include "base/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <vector>

namespace rs {

TEST(ThreadPool, CoversEveryIndexExactlyOnce) {
  ThreadPool pool(3);
  for (int64_t count : {1, 2, 7, 100, 1001}) {
    std::vector<std::atomic<int>> hits(count);
    pool.parallel_for(
        count,
        [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) hits[i]++;
        },
        4);
    for (auto& h : hits) EXPECT_EQ(h.load(), 1);
  }
}

TEST(ThreadPool, RethrowsAWorkersExceptionAfterAllRangesFinish) {
  ThreadPool pool(2);
  std::atomic<int> finished{0};
  EXPECT_THROW(pool.parallel_for(2,
                                 [&](int64_t begin, int64_t) {
                                   if (begin == 1) throw std::runtime_error("worker failed");
                                   finished++;
                                 }),
               std::runtime_error);
  EXPECT_EQ(finished.load(), 1);
  // The pool stays usable.
  pool.parallel_for(4, [&](int64_t begin, int64_t end) { finished += static_cast<int>(end - begin); });
  EXPECT_EQ(finished.load(), 5);
}

}  // namespace rs
