#include "base/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <vector>

namespace rs {

TEST(ThreadPool, CoversEveryIndexExactlyOnce) {
  ThreadPool pool(3);
  for (int64_t count : {1, 2, 7, 100, 1001}) {
    std::vector<std::atomic<int>> hits(count);
    pool.parallel_for(count, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) hits[i]++;
    }, 4);
    for (auto& h : hits) EXPECT_EQ(h.load(), 1);
  }
}

}  // namespace rs
