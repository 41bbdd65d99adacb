// StepStaging's BatchView: the count of leading one-token sequences (decode rows), for a backend that runs them apart
// from the prefill chunks after them.
#include "engine/step_staging.h"

#include <gtest/gtest.h>

#include "backend/backend.h"

namespace rs::engine {
namespace {

class StepStagingTest : public ::testing::Test {
 protected:
  StepStagingTest()
      : backend_(make_backend("cpu", BackendOptions{.num_threads = 1})),
        pool_(*backend_, kv::KvPoolConfig{.page_size = 4,
                                          .num_kv_heads = 1,
                                          .head_dim = 4,
                                          .groups = {kv::KvGroup{.window = 0, .layers = {0}, .num_pages = 32}}}),
        staging_(*backend_, pool_, 64) {}

  // One sequence per entry of `lengths`, each computing its last `length` positions of a 10-token context in pages
  // 3s, 3s + 1 and 3s + 2.
  ForwardBatch batch(const std::vector<int32_t>& lengths) {
    ForwardBatch b;
    b.max_pages = 3;
    b.seq_token_start = {0};
    b.page_tables.resize(1);
    for (size_t s = 0; s < lengths.size(); ++s) {
      for (int32_t p = 10 - lengths[s]; p < 10; ++p) b.token_ids.push_back(1), b.positions.push_back(p);
      b.seq_token_start.push_back(static_cast<int32_t>(b.token_ids.size()));
      b.seq_kv_len.push_back(10);
      for (int32_t page = 0; page < 3; ++page) b.page_tables[0].push_back(static_cast<int32_t>(3 * s) + page);
      b.logit_rows.push_back(b.seq_token_start.back() - 1);
    }
    return b;
  }

  int32_t decode_seqs(const std::vector<int32_t>& lengths, int32_t padded = 0) {
    const model::StepInputs inputs = staging_.upload(batch(lengths), padded, 64);
    return inputs.groups.at(0).num_decode_seqs;
  }

  std::unique_ptr<Backend> backend_;
  kv::KvPool pool_;
  StepStaging staging_;
};

TEST_F(StepStagingTest, CountsTheLeadingOneTokenSequences) {
  EXPECT_EQ(decode_seqs({1, 1, 5, 1}), 2);  // decode rows first, then a chunk; a later one-token row is not counted
  EXPECT_EQ(decode_seqs({5, 1}), 0);
  EXPECT_EQ(decode_seqs({1, 1, 1}), 3);
  EXPECT_EQ(decode_seqs({1, 1, 1}, 8), 8);  // the idle rows padding a decode step to a recorded graph's size
  EXPECT_EQ(decode_seqs({7}), 0);
}

}  // namespace
}  // namespace rs::engine
