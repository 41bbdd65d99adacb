// The scheduler with recurrent-state slots (hybrid models): every running sequence holds exactly one slot, carried
// through chunked prefill and decode, and every slot comes back at finish, abort and preemption; the other slots
// hold prefix-cache snapshots, which a later prompt sharing the prefix resumes from (FakeModel's state is a hash
// chain of the tokens, so a wrong or stale snapshot changes the sampled tokens).
#include <gtest/gtest.h>

#include <random>

#include "sched/fake_model_test_util.h"
#include "sched/scheduler.h"

namespace rs::sched {
namespace {

using testing::FakeModel;
using testing::Tracked;

class SchedulerStateTest : public ::testing::Test {
 protected:
  void make(int64_t pages, int32_t slots, int32_t max_running, int32_t chunk, bool prefix_cache = true,
            int32_t snapshot_interval = 0) {
    memory::KvPoolConfig kv;
    kv.page_size = 4;
    kv.groups.push_back(memory::KvGroup{0, {}, pages});
    SchedulerConfig config;
    config.context_length = 4096;
    config.max_running_requests = max_running;
    config.chunked_prefill_size = chunk;
    config.max_prefill_tokens = 2 * chunk;
    config.num_state_slots = slots;
    config.prefix_cache = prefix_cache;
    config.state_snapshot_interval = snapshot_interval;
    model_ = std::make_unique<FakeModel>(kv, slots);
    scheduler_ =
        std::make_unique<Scheduler>(config, kv, testing::in_two_phases([this](const engine::ForwardBatch& batch) {
                                      max_batch_ = std::max(max_batch_, batch.num_seqs());
                                      return model_->forward(batch);
                                    }));
  }

  // A prompt of `length` tokens from seed `id`, or `prefix` followed by such tokens.
  Tracked* submit(int length, int32_t max_new, uint64_t id, const std::vector<int32_t>& prefix = {}) {
    std::mt19937 rng(static_cast<uint32_t>(id));
    std::vector<int32_t> prompt = prefix;
    for (int i = 0; i < length; ++i) prompt.push_back(static_cast<int32_t>(rng() % 900) + 1);
    auto request = requests_.make_request(std::move(prompt), max_new);
    request->id = id;
    return requests_.submit(*scheduler_, std::move(request));
  }

  void step() {
    scheduler_->step();
    EXPECT_LE(scheduler_->stats().state_slots_used, slots_limit_);
    const SchedulerStats stats = scheduler_->stats();
    EXPECT_EQ(stats.state_slots_used, stats.num_running + stats.state_snapshots);
    requests_.collect();
  }

  void run_to_completion() {
    for (int i = 0; i < 20000 && !all_finished(); ++i) step();
    ASSERT_TRUE(all_finished());
    step();
    EXPECT_EQ(scheduler_->stats().state_slots_used, scheduler_->stats().state_snapshots);
    EXPECT_EQ(scheduler_->stats().num_running, 0);
  }

  bool all_finished() const { return requests_.all_finished(); }

  void expect_reference_outputs() {
    for (const auto& run : requests_.all()) {
      ASSERT_EQ(run->reason, FinishReason::kLength);
      EXPECT_EQ(run->output, model_->reference(run->prompt, static_cast<int32_t>(run->output.size())));
    }
  }

  int32_t slots_limit_ = 0;
  int32_t max_batch_ = 0;
  std::unique_ptr<FakeModel> model_;
  std::unique_ptr<Scheduler> scheduler_;
  testing::Requests requests_;
};

TEST_F(SchedulerStateTest, ChunkedPrefillAndDecodeCarryEachSequencesSlot) {
  slots_limit_ = 4;
  make(/*pages=*/4096, /*slots=*/4, /*max_running=*/4, /*chunk=*/7);
  for (uint64_t id = 1; id <= 6; ++id) submit(20 + 9 * static_cast<int>(id), 12, id);
  run_to_completion();
  expect_reference_outputs();
}

TEST_F(SchedulerStateTest, FewerSlotsThanRunningRequestsBoundTheBatch) {
  slots_limit_ = 2;
  make(4096, /*slots=*/2, /*max_running=*/8, 16);
  for (uint64_t id = 1; id <= 7; ++id) submit(30, 5, id);
  run_to_completion();
  expect_reference_outputs();
  EXPECT_EQ(max_batch_, 2);
}

TEST_F(SchedulerStateTest, AbortMidPrefillAndMidDecodeReturnsTheSlots) {
  slots_limit_ = 3;
  make(4096, 3, 3, 8);
  Tracked* prefilling = submit(200, 10, 1);
  Tracked* decoding = submit(10, 1000, 2);
  submit(15, 6, 3);
  for (int i = 0; i < 4; ++i) step();
  EXPECT_EQ(scheduler_->stats().num_running, 3);
  EXPECT_TRUE(prefilling->output.empty());
  EXPECT_FALSE(decoding->output.empty());
  scheduler_->abort(1);
  scheduler_->abort(2);
  Tracked* later = submit(40, 4, 4);  // takes a freed slot, starting from zero state
  run_to_completion();
  EXPECT_EQ(prefilling->reason, FinishReason::kAbort);
  EXPECT_EQ(decoding->reason, FinishReason::kAbort);
  EXPECT_EQ(later->output, model_->reference(later->prompt, 4));
}

TEST_F(SchedulerStateTest, PreemptionReleasesTheSlotAndRecomputesFromPositionZero) {
  slots_limit_ = 4;
  // 40 pages of 4 tokens: four sequences growing to 30 + 40 tokens cannot all stay, so some are preempted,
  // readmitted (possibly with another slot) and recomputed from position 0.
  make(/*pages=*/40, /*slots=*/4, /*max_running=*/4, /*chunk=*/16);
  for (uint64_t id = 1; id <= 4; ++id) submit(30, 40, id);
  run_to_completion();
  EXPECT_GT(scheduler_->stats().preemptions, 0u);
  expect_reference_outputs();
}

TEST_F(SchedulerStateTest, SharedPrefixResumesFromTheDeepestSnapshot) {
  slots_limit_ = 8;
  make(4096, /*slots=*/8, /*max_running=*/4, /*chunk=*/64, true, /*snapshot_interval=*/16);
  Tracked* first = submit(50, 6, 1);
  run_to_completion();
  // Snapshots at 16 and 32 (the interval) and 48 (the prompt's last page boundary): prefill chunks end there.
  EXPECT_EQ(scheduler_->stats().state_snapshots, 3);
  EXPECT_EQ(scheduler_->stats().cached_prompt_tokens, 0u);
  const std::vector<int32_t> prompt = first->prompt;
  submit(10, 6, 2, prompt);  // the whole prompt and more: resumes after 48 tokens
  run_to_completion();
  EXPECT_EQ(scheduler_->stats().cached_prompt_tokens, 48u);
  submit(7, 6, 3, std::vector<int32_t>(prompt.begin(), prompt.begin() + 21));  // shares 21: resumes after 16
  run_to_completion();
  EXPECT_EQ(scheduler_->stats().cached_prompt_tokens, 48u + 16u);
  submit(50, 6, 4);  // shares nothing
  run_to_completion();
  EXPECT_EQ(scheduler_->stats().cached_prompt_tokens, 48u + 16u);
  expect_reference_outputs();
}

// Chunks of 7 over a 10-token prompt (page 4; the snapshot boundary is the last page boundary before the final token,
// 8) run 0 -> 7, 7 -> 8, 8 -> 10: the one-token chunk's pages must be cached too, or the snapshot has no node to
// attach to and the next identical prompt reuses nothing (seen through the hybrid goldens: prompt 300, page 16).
TEST_F(SchedulerStateTest, AOneTokenChunkBeforeTheBoundaryStillSnapshots) {
  slots_limit_ = 8;
  make(4096, /*slots=*/8, /*max_running=*/2, /*chunk=*/7);
  Tracked* first = submit(10, 3, 1);
  run_to_completion();
  EXPECT_EQ(scheduler_->stats().state_snapshots, 1);
  submit(0, 3, 2, first->prompt);
  run_to_completion();
  EXPECT_EQ(scheduler_->stats().cached_prompt_tokens, 8u);
  expect_reference_outputs();
}

TEST_F(SchedulerStateTest, TheNextTurnResumesAfterThePreviousReply) {
  // A conversation's second turn sends the first prompt and reply back with more: it resumes from the reply's last
  // output snapshot (every 64 tokens; one rolling snapshot per sequence without an interval).
  slots_limit_ = 8;
  make(4096, /*slots=*/8, /*max_running=*/2, /*chunk=*/64);
  Tracked* first = submit(30, 110, 1);
  run_to_completion();
  // The prompt's last page boundary (28) and the reply's newest output snapshot (128: 30 + 110 tokens, the last one
  // never computed); the one at 64 was released when 128 was taken.
  EXPECT_EQ(scheduler_->stats().state_snapshots, 2);
  std::vector<int32_t> conversation = first->prompt;
  conversation.insert(conversation.end(), first->output.begin(), first->output.end());
  submit(7, 5, 2, conversation);
  run_to_completion();
  EXPECT_EQ(scheduler_->stats().cached_prompt_tokens, 128u);
  expect_reference_outputs();
}

TEST_F(SchedulerStateTest, OutputSnapshotsOnTheIntervalAreKept) {
  slots_limit_ = 10;
  make(4096, /*slots=*/10, /*max_running=*/1, /*chunk=*/64, true, /*snapshot_interval=*/8);
  const Tracked* first = submit(30, 140, 1);
  run_to_completion();
  // Prompt: 8, 16, 24 (interval) and 28 (its last page boundary); reply: 64 and 128, both on the interval.
  EXPECT_EQ(scheduler_->stats().state_snapshots, 6);
  std::vector<int32_t> resumed(first->prompt);
  resumed.insert(resumed.end(), first->output.begin(), first->output.begin() + 70);  // 100 tokens: resumes after 64
  submit(3, 4, 2, resumed);
  run_to_completion();
  EXPECT_EQ(scheduler_->stats().cached_prompt_tokens, 64u);
  expect_reference_outputs();
}

TEST_F(SchedulerStateTest, SnapshotsGiveWayToRunningSequences) {
  // Snapshots fill the slots the first sequence leaves spare, then three sequences arrive at once: admissions drop
  // the least recently used snapshots for their slots, all three run together, a shared prefix resumes from a
  // snapshot while one is left, and the outputs stay right.
  slots_limit_ = 3;
  make(4096, /*slots=*/3, /*max_running=*/3, /*chunk=*/8, true, /*snapshot_interval=*/8);
  const std::vector<int32_t> shared = submit(29, 4, 1)->prompt;
  run_to_completion();
  EXPECT_EQ(scheduler_->stats().state_snapshots, 2);
  submit(6, 5, 2, shared);
  submit(30, 5, 3);
  submit(9, 5, 4, shared);
  step();
  EXPECT_EQ(scheduler_->stats().num_running, 3);  // every snapshot gave its slot up
  EXPECT_EQ(scheduler_->stats().state_snapshots, 0);
  run_to_completion();
  EXPECT_GT(scheduler_->stats().cached_prompt_tokens, 0u);
  expect_reference_outputs();
}

TEST_F(SchedulerStateTest, WithoutThePrefixCacheNoSnapshotIsTaken) {
  slots_limit_ = 4;
  make(4096, 4, 2, 16, /*prefix_cache=*/false, 8);
  const Tracked* first = submit(40, 4, 1);
  run_to_completion();
  submit(10, 4, 2, first->prompt);
  run_to_completion();
  EXPECT_EQ(scheduler_->stats().state_snapshots, 0);
  EXPECT_EQ(scheduler_->stats().cached_prompt_tokens, 0u);
  expect_reference_outputs();
}

}  // namespace
}  // namespace rs::sched
