// make_in_process_group: sums in rank order on every rank, gathers column blocks on rank 0, and aborts cleanly.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "backend/communicator.h"

namespace rs {
namespace {

// Runs body(rank) on one thread per rank; returns how many threw.
template <typename Body>
int run_ranks(std::vector<std::unique_ptr<Communicator>>& group, Body body) {
  std::atomic<int> failures = 0;
  std::vector<std::thread> threads;
  for (auto& comm : group)
    threads.emplace_back([&, c = comm.get()] {
      try {
        body(*c);
      } catch (const std::exception&) {
        ++failures;
        c->abort();
      }
    });
  for (auto& t : threads) t.join();
  return failures;
}

TEST(InProcessGroup, AllReduceSumsInRankOrderOnEveryRank) {
  for (int32_t size : {1, 2, 3, 4}) {
    auto group = make_in_process_group(size);
    std::vector<std::vector<float>> data(size);
    for (int32_t r = 0; r < size; ++r)
      for (int i = 0; i < 37; ++i) data[r].push_back(static_cast<float>((r + 1) * 1000 + i) * (i % 2 ? 1e-7f : 1.0f));
    std::vector<float> expected(37);
    for (int i = 0; i < 37; ++i) {
      float sum = data[0][i];
      for (int32_t r = 1; r < size; ++r) sum += data[r][i];
      expected[i] = sum;
    }
    // Repeated collectives reuse the barrier's generations.
    for (int repeat = 0; repeat < 3; ++repeat) {
      auto copies = data;
      EXPECT_EQ(
          run_ranks(group,
                    [&](Communicator& c) { c.all_reduce_sum(Tensor(copies[c.rank()].data(), DType::kF32, {37})); }),
          0);
      for (int32_t r = 0; r < size; ++r)
        for (int i = 0; i < 37; ++i) ASSERT_EQ(copies[r][i], expected[i]) << "size " << size << " rank " << r;
    }
  }
}

TEST(InProcessGroup, GatherColumnsOnRankZero) {
  auto group = make_in_process_group(3);
  std::vector<std::vector<float>> local(3);
  for (int r = 0; r < 3; ++r)
    for (int row = 0; row < 2; ++row)
      for (int col = 0; col < 4; ++col) local[r].push_back(static_cast<float>(100 * r + 10 * row + col));
  std::vector<float> full(2 * 12, -1.0f);
  EXPECT_EQ(run_ranks(group,
                      [&](Communicator& c) {
                        Tensor out = c.rank() == 0 ? Tensor(full.data(), DType::kF32, {2, 12}) : Tensor();
                        c.gather_columns(Tensor(local[c.rank()].data(), DType::kF32, {2, 4}), out);
                      }),
            0);
  for (int row = 0; row < 2; ++row)
    for (int col = 0; col < 12; ++col) EXPECT_EQ(full[row * 12 + col], 100 * (col / 4) + 10 * row + col % 4);
}

TEST(InProcessGroup, AFailingRankReleasesTheOthersUntilReset) {
  auto group = make_in_process_group(3);
  std::vector<std::vector<float>> data(3, std::vector<float>(8, 1.0f));
  // Rank 1 fails before its collective: the others must not wait for it forever.
  EXPECT_EQ(run_ranks(group,
                      [&](Communicator& c) {
                        if (c.rank() == 1) throw std::runtime_error("rank 1 failed");
                        c.all_reduce_sum(Tensor(data[c.rank()].data(), DType::kF32, {8}));
                      }),
            3);
  for (auto& comm : group) comm->reset();
  EXPECT_EQ(
      run_ranks(group, [&](Communicator& c) { c.all_reduce_sum(Tensor(data[c.rank()].data(), DType::kF32, {8})); }), 0);
  EXPECT_EQ(data[2][0], 3.0f);
}

}  // namespace
}  // namespace rs
