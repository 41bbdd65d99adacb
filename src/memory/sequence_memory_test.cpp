#include "memory/sequence_memory.h"

#include <gtest/gtest.h>

#include <numeric>

namespace rs::memory {
namespace {

// One full-attention group of `pages` pages of 4 tokens.
KvPoolConfig pool(int64_t pages) {
  KvPoolConfig config;
  config.page_size = 4;
  config.groups.resize(1);
  config.groups[0].num_pages = pages;
  return config;
}

std::vector<int32_t> tokens(int count, int32_t first = 10) {
  std::vector<int32_t> result(count);
  std::iota(result.begin(), result.end(), first);
  return result;
}

using Copy = std::pair<int32_t, int32_t>;

TEST(MemoryManager, AdmitsWhatFitsAndGivesEverythingBack) {
  MemoryManager memory(pool(8), MemoryConfig{});
  const auto prompt = tokens(10);
  SequenceMemory seq;
  EXPECT_EQ(memory.acquire(seq, prompt, 9), 0);  // nothing cached yet
  EXPECT_EQ(seq.state_slot, -1);                 // no recurrent layers: no slot
  EXPECT_TRUE(memory.fits(10, 0, 1));            // 3 pages + 1 of headroom of 8
  EXPECT_FALSE(memory.fits(30, 0, 1));           // 8 pages + 1
  EXPECT_TRUE(memory.could_ever_fit(32));
  EXPECT_FALSE(memory.could_ever_fit(33));
  EXPECT_EQ(memory.reserve(seq, 0, 10), 10);
  EXPECT_EQ(memory.stats().kv[0].used_pages, 3);
  memory.commit(seq, prompt, 10, 0, 10);  // a prefill: its two whole pages are cached
  memory.release(seq);
  EXPECT_FALSE(seq.holds_pages());
  const MemoryStats after = memory.stats();
  EXPECT_EQ(after.kv[0].used_pages, 2);  // the cached pages stay for the next request
  EXPECT_EQ(after.kv[0].evictable_pages, 2);

  SequenceMemory again;
  EXPECT_EQ(memory.acquire(again, prompt, 9), 8);  // the two cached pages
  memory.release(again);
  memory.flush_cache();
  EXPECT_EQ(memory.stats().kv[0].used_pages, 0);
}

TEST(MemoryManager, HybridPromptsSnapshotAtTheirLastPageBoundaryAndResumeThere) {
  MemoryManager memory(pool(16), MemoryConfig{.prefix_cache = true, .num_state_slots = 4});
  const auto prompt = tokens(11);  // last page boundary before the final token: 8
  SequenceMemory first;
  EXPECT_EQ(memory.acquire(first, prompt, 10), 0);
  ASSERT_GE(first.state_slot, 0);
  EXPECT_EQ(memory.chunk_end(11, 0, 11), 8);  // the chunk stops at the boundary
  EXPECT_EQ(memory.chunk_end(11, 8, 11), 11);
  EXPECT_EQ(memory.reserve(first, 0, 8), 8);
  memory.commit(first, prompt, 11, 0, 8);
  const StepCopies copies = memory.take_step_copies();
  ASSERT_EQ(copies.snapshots.size(), 1u);
  const int32_t snapshot = copies.snapshots[0];
  EXPECT_EQ(copies.copies, (std::vector<Copy>{{first.state_slot, snapshot}}));
  EXPECT_TRUE(memory.take_step_copies().copies.empty());  // handed over once
  EXPECT_EQ(memory.stats().state_snapshots, 1);

  // The same prompt resumes after the snapshot, copied into its own slot before its first step.
  SequenceMemory second;
  EXPECT_EQ(memory.acquire(second, prompt, 10), 8);
  ASSERT_GE(second.state_slot, 0);
  EXPECT_EQ(memory.take_step_copies().copies, (std::vector<Copy>{{snapshot, second.state_slot}}));
  memory.release(first);
  memory.release(second);
  EXPECT_EQ(memory.stats().state_slots_used, 1);  // the snapshot alone
}

TEST(MemoryManager, SlotsHeldBySequencesRefuseAdmissionButSnapshotsAreEvicted) {
  MemoryManager memory(pool(16), MemoryConfig{.prefix_cache = true, .num_state_slots = 2});
  const auto prompt = tokens(11);
  SequenceMemory a;
  ASSERT_EQ(memory.acquire(a, prompt, 10), 0);
  ASSERT_EQ(memory.reserve(a, 0, 8), 8);
  memory.commit(a, prompt, 11, 0, 8);  // the snapshot takes the second slot
  memory.take_step_copies();
  EXPECT_EQ(memory.stats().state_slots_used, 2);

  SequenceMemory b;
  const auto other = tokens(11, 100);
  EXPECT_EQ(memory.acquire(b, other, 10), 0);  // the snapshot is dropped for a running sequence
  EXPECT_GE(b.state_slot, 0);
  EXPECT_EQ(memory.stats().state_snapshots, 0);
  SequenceMemory c;
  EXPECT_EQ(memory.acquire(c, other, 10), -1);  // both slots run sequences
  EXPECT_EQ(c.state_slot, -1);
  EXPECT_FALSE(c.holds_pages());
  memory.release(a);
  memory.release(b);
}

TEST(MemoryManager, AFailedStepDropsTheSnapshotsItWouldHaveCopied) {
  MemoryManager memory(pool(16), MemoryConfig{.prefix_cache = true, .num_state_slots = 4});
  const auto prompt = tokens(11);
  SequenceMemory seq;
  memory.acquire(seq, prompt, 10);
  memory.reserve(seq, 0, 8);
  memory.commit(seq, prompt, 11, 0, 8);
  const StepCopies copies = memory.take_step_copies();
  ASSERT_EQ(memory.stats().state_snapshots, 1);
  memory.step_failed(copies);
  EXPECT_EQ(memory.stats().state_snapshots, 0);
  memory.release(seq);
  EXPECT_EQ(memory.stats().state_slots_used, 0);
}

TEST(MemoryManager, CheckpointsRollBackAndReleaseDropsCopiesIntoItsSlots) {
  MemoryManager memory(pool(16), MemoryConfig{.prefix_cache = false, .num_state_slots = 3});
  SequenceMemory seq;
  ASSERT_TRUE(memory.ensure_state_slot(seq));
  const int32_t c0 = memory.take_checkpoint(seq), c1 = memory.take_checkpoint(seq);
  EXPECT_GE(c0, 0);
  EXPECT_GE(c1, 0);
  EXPECT_EQ(memory.take_checkpoint(seq), -1);  // no slot left: nothing taken
  EXPECT_EQ(seq.checkpoints, (std::vector<int32_t>{c0, c1}));
  memory.rollback(seq, 1);
  EXPECT_EQ(memory.take_step_copies().copies, (std::vector<Copy>{{c1, seq.state_slot}}));
  memory.drop_checkpoints(seq);
  EXPECT_EQ(memory.free_state_slots(), 2);

  // A rollback still pending when the sequence ends is dropped with it; a copy out of its slot is not.
  SequenceMemory other;
  ASSERT_TRUE(memory.ensure_state_slot(other));
  memory.take_checkpoint(seq);
  memory.rollback(seq, 0);
  memory.copy_state(seq.state_slot, other.state_slot);
  const int32_t source = seq.state_slot;
  memory.release(seq);
  EXPECT_EQ(memory.take_step_copies().copies, (std::vector<Copy>{{source, other.state_slot}}));
  EXPECT_EQ(memory.free_state_slots(), 2);
  memory.release(other);
}

}  // namespace
}  // namespace rs::memory
