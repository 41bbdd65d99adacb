// Speculative decoding inside continuous batching, against FakeModel: whatever the drafts are (all right, partly
// wrong, n-gram guesses), every request gets exactly its plain greedy output, and pages roll back without leaks.
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "sched/fake_model_test_util.h"
#include "sched/scheduler.h"
#include "spec/ngram_drafter.h"

namespace rs::sched {
namespace {

using testing::FakeModel;
using testing::geometry;  // page size 4
using testing::Tracked;

// Proposes the model's true continuation, optionally with one token changed at a pseudo-random place (or none).
class OracleDrafter final : public spec::Drafter {
 public:
  OracleDrafter(const FakeModel& model, int corrupt_one_in) : model_(model), corrupt_one_in_(corrupt_one_in) {}
  void propose(std::span<spec::DraftRequest> requests) override {
    for (auto& request : requests) {
      ++proposals;
      live.insert(request.id);
      request.draft = model_.reference({request.tokens.begin(), request.tokens.end()}, request.max_tokens);
      if (always_wrong) {
        for (auto& token : request.draft) token = (token + 1) % FakeModel::kVocab;
      } else if (corrupt_one_in_ > 0 && rng_() % corrupt_one_in_ != 0) {
        auto& token = request.draft[rng_() % request.draft.size()];
        token = (token + 1) % FakeModel::kVocab;
      }
    }
  }
  void release(uint64_t id) override { live.erase(id); }

  int proposals = 0;
  bool always_wrong = false;
  std::set<uint64_t> live;  // requests drafted for and not released yet

 private:
  const FakeModel& model_;
  int corrupt_one_in_;
  std::mt19937 rng_{11};
};

class SpeculativeTest : public ::testing::Test {
 protected:
  // corrupt_one_in: 0 = oracle drafts, n = all but one in n drafts carry one wrong token; -1 = the n-gram drafter.
  void make(const memory::KvPoolConfig& kv, int corrupt_one_in, SchedulerConfig config = {}) {
    if (config.context_length == 0) config.context_length = 4096;
    if (config.speculative.algorithm == spec::SpecAlgorithm::kNone)
      config.speculative.algorithm = spec::SpecAlgorithm::kNgram;  // any: the scheduler only reads the policy
    config.speculative.min_accept_rate = min_accept_rate_;
    model_ = std::make_unique<FakeModel>(kv, config.num_state_slots);
    std::unique_ptr<spec::Drafter> drafter;
    if (corrupt_one_in < 0) {
      drafter = std::make_unique<spec::NgramDrafter>(1, 4);
    } else {
      auto oracle = std::make_unique<OracleDrafter>(*model_, corrupt_one_in);
      oracle_ = oracle.get();
      drafter = std::move(oracle);
    }
    scheduler_ =
        std::make_unique<Scheduler>(config, kv, testing::in_two_phases([this](const engine::ForwardBatch& batch) {
                                      if (fail_next_) {
                                        fail_next_ = false;
                                        throw std::runtime_error("device fell over");
                                      }
                                      if (inspect_) inspect_(batch);
                                      return model_->forward(batch);
                                    }),
                                    std::move(drafter));
  }

  Tracked* submit(std::vector<int32_t> prompt, int32_t max_new, std::vector<int32_t> stops = {}) {
    return requests_.submit(*scheduler_, std::move(prompt), max_new, std::move(stops));
  }

  void run_to_completion() { ASSERT_TRUE(requests_.run(*scheduler_)); }

  void expect_exact_and_no_leaks() {
    for (const auto& out : requests_.all()) {
      EXPECT_EQ(out->reason, FinishReason::kLength) << out->error;
      EXPECT_EQ(out->output, model_->reference(out->prompt, static_cast<int32_t>(out->output.size())));
    }
    scheduler_->step();
    const SchedulerStats stats = scheduler_->stats();
    EXPECT_EQ(stats.num_running, 0);
    for (const auto& group : stats.kv) EXPECT_EQ(group.used_pages, group.cached_pages) << "window " << group.window;
    EXPECT_EQ(stats.state_slots_used, stats.state_snapshots);  // no checkpoint slot left behind
    scheduler_->flush_cache();
    scheduler_->step();
    for (const auto& group : scheduler_->stats().kv) EXPECT_EQ(group.used_pages, 0) << "window " << group.window;
    EXPECT_EQ(scheduler_->stats().state_slots_used, 0);
    if (oracle_ != nullptr) {
      EXPECT_TRUE(oracle_->live.empty()) << "the drafter was not told a request ended";
    }
  }

  // Verify passes (sequences with more than one logit row) over all steps.
  int verify_rows() const {
    int verifies = 0;
    for (const auto& batch : model_->batches()) {
      for (int s = 0; s < batch.num_seqs(); ++s) {
        int rows = 0;
        for (int32_t row : batch.logit_rows)
          rows += row >= batch.seq_token_start[s] && row < batch.seq_token_start[s + 1];
        verifies += rows > 1;
      }
    }
    return verifies;
  }

  double min_accept_rate_ = 0;  // pausing off unless a test turns it on
  std::unique_ptr<FakeModel> model_;
  std::unique_ptr<Scheduler> scheduler_;
  OracleDrafter* oracle_ = nullptr;
  testing::Requests requests_;
  bool fail_next_ = false;
  std::function<void(const engine::ForwardBatch&)> inspect_;
};

std::vector<int32_t> random_prompt(std::mt19937& rng, int length) {
  std::vector<int32_t> prompt(length);
  for (auto& token : prompt) token = static_cast<int32_t>(rng() % 900) + 1;
  return prompt;
}

TEST_F(SpeculativeTest, RightDraftsAreAllAcceptedAndCutTheSteps) {
  make(geometry({{0, 512}}), 0, SchedulerConfig{.speculative = {.num_draft_tokens = 4}});
  Tracked* out = submit({5, 6, 7, 8, 9, 10, 11}, 40);
  run_to_completion();
  EXPECT_EQ(out->totals.accepted, out->totals.drafted);
  EXPECT_GT(out->totals.verifies, 0);
  // 1 prefill step, then 5 tokens per verify step: 39 tokens after the first in 8 steps.
  EXPECT_LE(model_->batches().size(), 10u);
  const SchedulerStats stats = scheduler_->stats();
  EXPECT_EQ(stats.spec_accepted_tokens, stats.spec_draft_tokens);
  EXPECT_EQ(stats.spec_verifies, static_cast<uint64_t>(out->totals.verifies));
  EXPECT_EQ(stats.generation_tokens, 40u);
  expect_exact_and_no_leaks();
}

// The verify rows sample with the history a plain decode step would have: one more output token per row, ending
// with the row's own input token (checked inside the step: the spans point into live sequences).
TEST_F(SpeculativeTest, VerifyRowsCarryTheirOwnHistory) {
  make(geometry({{0, 512}}), 0, SchedulerConfig{.speculative = {.num_draft_tokens = 3}});
  int verify_batches = 0;
  inspect_ = [&](const engine::ForwardBatch& batch) {
    if (batch.logit_rows.size() < 2) return;
    ++verify_batches;
    ASSERT_EQ(batch.sampling.size(), batch.logit_rows.size());
    EXPECT_EQ(batch.num_tokens(), static_cast<int32_t>(batch.logit_rows.size()));
    for (size_t r = 0; r < batch.sampling.size(); ++r) {
      ASSERT_FALSE(batch.sampling[r].output_ids.empty());
      EXPECT_EQ(batch.sampling[r].output_ids.back(), batch.token_ids[batch.logit_rows[r]]);
      if (r == 0) continue;
      EXPECT_EQ(batch.sampling[r].output_ids.size(), batch.sampling[r - 1].output_ids.size() + 1);
      EXPECT_EQ(batch.logit_rows[r], batch.logit_rows[r - 1] + 1);
    }
  };
  submit({1, 2, 3}, 12);
  run_to_completion();
  EXPECT_GT(verify_batches, 0);
}

// Wrong drafts roll back: pages written for rejected positions are rewritten, windows keep what the kept tokens read.
// Variants: full attention; full + window; window only (page size 4, windows 6 and 9 cross pages).
class RollbackTest : public SpeculativeTest, public ::testing::WithParamInterface<int> {};

TEST_P(RollbackTest, PartlyWrongDraftsGiveExactlyThePlainOutput) {
  const int variant = GetParam();
  memory::KvPoolConfig kv = variant == 0   ? geometry({{0, 512}})
                            : variant == 1 ? geometry({{0, 512}, {6, 512}})
                                           : geometry({{9, 512}});
  make(kv, 3,
       SchedulerConfig{.max_running_requests = 6,
                       .max_prefill_tokens = 40,
                       .chunked_prefill_size = 7,
                       .speculative = {.num_draft_tokens = 5}});
  std::mt19937 rng(variant);
  for (int i = 0; i < 12; ++i) submit(random_prompt(rng, 1 + static_cast<int>(rng() % 60)), 1 + rng() % 40);
  run_to_completion();
  const SchedulerStats stats = scheduler_->stats();
  EXPECT_GT(stats.spec_accepted_tokens, 0u);
  EXPECT_LT(stats.spec_accepted_tokens, stats.spec_draft_tokens);
  EXPECT_GT(verify_rows(), 12);
  expect_exact_and_no_leaks();
}

INSTANTIATE_TEST_SUITE_P(Groups, RollbackTest, ::testing::Values(0, 1, 2));

// Hybrid models: the recurrent state (FakeModel's hash chain) went through every draft token of a verify step, so a
// rejection must restore the state after the last accepted token from its checkpoint slot, or every later token
// changes. With and without the prefix cache (whose state snapshots share the slots), and beside windowed attention.
class HybridRollbackTest : public SpeculativeTest, public ::testing::WithParamInterface<bool> {};

TEST_P(HybridRollbackTest, RejectedDraftsRollTheRecurrentStateBack) {
  make(geometry({{0, 512}, {6, 512}}), 3,
       SchedulerConfig{.max_running_requests = 6,
                       .max_prefill_tokens = 40,
                       .chunked_prefill_size = 8,
                       .prefix_cache = GetParam(),
                       .num_state_slots = 40,
                       .state_snapshot_interval = 8,
                       .speculative = {.num_draft_tokens = 5}});
  std::mt19937 rng(9);
  const auto shared = random_prompt(rng, 20);
  for (int i = 0; i < 12; ++i) {
    auto prompt = i % 2 ? shared : random_prompt(rng, 1 + static_cast<int>(rng() % 50));
    if (i % 2) prompt.push_back(i);  // shares 20 tokens with the other odd requests
    submit(prompt, 1 + rng() % 40);
  }
  run_to_completion();
  const SchedulerStats stats = scheduler_->stats();
  EXPECT_GT(stats.spec_accepted_tokens, 0u);
  EXPECT_LT(stats.spec_accepted_tokens, stats.spec_draft_tokens);
  EXPECT_GT(verify_rows(), 12);
  size_t checkpointed = 0;
  for (const auto& batch : model_->batches()) checkpointed += !batch.state_checkpoints.empty();
  EXPECT_GT(checkpointed, 0u);
  expect_exact_and_no_leaks();
}

INSTANTIATE_TEST_SUITE_P(PrefixCache, HybridRollbackTest, ::testing::Bool());

// A hybrid sequence drafts only as far as free state slots allow checkpoints; with none spare it decodes plainly.
TEST_F(SpeculativeTest, HybridDraftsNeedFreeStateSlots) {
  make(geometry({{0, 512}}), 0,
       SchedulerConfig{.prefix_cache = false, .num_state_slots = 2, .speculative = {.num_draft_tokens = 4}});
  submit({1, 2, 3}, 20);
  submit({4, 5, 6}, 20);
  run_to_completion();
  EXPECT_EQ(verify_rows(), 0);
  expect_exact_and_no_leaks();

  requests_.clear();
  make(geometry({{0, 512}}), 0,
       SchedulerConfig{.prefix_cache = false, .num_state_slots = 3, .speculative = {.num_draft_tokens = 4}});
  Tracked* out = submit({1, 2, 3}, 20);
  run_to_completion();
  EXPECT_GT(out->totals.verifies, 0);
  for (const auto& batch : model_->batches())
    EXPECT_LE(std::count_if(batch.state_checkpoints.begin(), batch.state_checkpoints.end(),
                            [](int32_t slot) { return slot >= 0; }),
              2);
  expect_exact_and_no_leaks();
}

TEST_F(SpeculativeTest, NgramDraftsOnRepetitivePromptsStayExact) {
  // With only a window of 4 the fake model's next token depends on the last 4 tokens alone, so a prompt that ends
  // as it began (X ... X) makes the output repeat what followed X: the n-gram drafter finds it and it is accepted.
  make(geometry({{4, 512}}), -1, SchedulerConfig{.speculative = {.num_draft_tokens = 4}});
  std::mt19937 rng(5);
  for (int i = 0; i < 4; ++i) {
    const auto x = random_prompt(rng, 4);
    std::vector<int32_t> prompt = x;
    const auto continuation = model_->reference(x, 30);
    prompt.insert(prompt.end(), continuation.begin(), continuation.end());
    prompt.insert(prompt.end(), x.begin(), x.end());
    submit(prompt, 20 + i);
    submit(random_prompt(rng, 20), 20);  // beside requests whose drafts fail
  }
  run_to_completion();
  const SchedulerStats stats = scheduler_->stats();
  EXPECT_GT(stats.spec_accepted_tokens, 40u);
  EXPECT_LT(stats.steps, 40u);
  expect_exact_and_no_leaks();
}

TEST_F(SpeculativeTest, AStopTokenInsideTheAcceptedDraftEndsThere) {
  make(geometry({{0, 512}}), 0, SchedulerConfig{.speculative = {.num_draft_tokens = 6}});
  const std::vector<int32_t> prompt = {3, 1, 4, 1, 5};
  const auto expected = model_->reference(prompt, 12);
  Tracked* out = submit(prompt, 12, {expected[3]});
  run_to_completion();
  EXPECT_EQ(out->reason, FinishReason::kStop);
  EXPECT_TRUE(out->stop_token);
  EXPECT_EQ(out->output, std::vector<int32_t>(expected.begin(), expected.begin() + 4));
  EXPECT_EQ(scheduler_->stats().generation_tokens, 4u);
}

TEST_F(SpeculativeTest, DraftsNeverPassMaxNewTokensOrTheContext) {
  make(geometry({{0, 512}}), 0, SchedulerConfig{.context_length = 20, .speculative = {.num_draft_tokens = 8}});
  Tracked* a = submit({1, 2, 3}, 3);
  Tracked* b = submit(std::vector<int32_t>(12, 7), 8);  // exactly fills the context of 20
  run_to_completion();
  EXPECT_EQ(a->output.size(), 3u);
  EXPECT_EQ(b->output.size(), 8u);
  for (const auto& batch : model_->batches())
    for (int32_t pos : batch.positions) EXPECT_LT(pos, 20);
  expect_exact_and_no_leaks();
}

TEST_F(SpeculativeTest, LargeDecodeBatchesVerifyNothing) {
  make(geometry({{0, 512}}), 0, SchedulerConfig{.speculative = {.num_draft_tokens = 4, .max_batch = 2}});
  for (int i = 0; i < 4; ++i) submit({i + 1, 2, 3}, i < 2 ? 10 : 30);
  run_to_completion();
  for (const auto& batch : model_->batches()) {
    int decodes = 0;
    for (int s = 0; s < batch.num_seqs(); ++s) decodes += batch.seq_token_start[s + 1] - batch.seq_token_start[s] >= 1;
    if (decodes > 2) {
      EXPECT_EQ(batch.logit_rows.size(), static_cast<size_t>(batch.num_seqs()));
    }
  }
  EXPECT_GT(verify_rows(), 0);  // once two requests finished, the others drafted
  expect_exact_and_no_leaks();
}

TEST_F(SpeculativeTest, DraftingPausesWhileNothingIsAccepted) {
  min_accept_rate_ = 0.3;
  make(geometry({{0, 512}}), 0,
       SchedulerConfig{.speculative = {.num_draft_tokens = 4, .warmup_verifies = 4, .retry_after = 1000}});
  oracle_->always_wrong = true;
  Tracked* out = submit({9, 8, 7}, 60);
  run_to_completion();
  EXPECT_EQ(out->totals.verifies, 4);  // then paused for the rest of the request
  EXPECT_EQ(out->totals.accepted, 0);
  expect_exact_and_no_leaks();
}

TEST_F(SpeculativeTest, PreemptionWithDraftsRecomputesExactly) {
  // 40 pages = 160 token slots for 8 requests of 70 tokens each: decode growth preempts.
  make(geometry({{0, 40}, {8, 64}}), 3,
       SchedulerConfig{.max_running_requests = 8, .speculative = {.num_draft_tokens = 4}});
  std::mt19937 rng(3);
  for (int i = 0; i < 8; ++i) submit(random_prompt(rng, 30), 40);
  run_to_completion();
  EXPECT_GT(scheduler_->stats().preemptions, 0u);
  expect_exact_and_no_leaks();
}

TEST_F(SpeculativeTest, AFailedVerifyStepFailsItsRequestsCleanly) {
  make(geometry({{0, 64}}), 0, SchedulerConfig{.speculative = {.num_draft_tokens = 4}});
  Tracked* out = submit({4, 4, 4}, 30);
  scheduler_->step();  // prefill
  fail_next_ = true;   // the first verify step
  run_to_completion();
  EXPECT_EQ(out->reason, FinishReason::kError);
  EXPECT_EQ(out->error, "device fell over");
  scheduler_->flush_cache();
  scheduler_->step();
  for (const auto& group : scheduler_->stats().kv) EXPECT_EQ(group.used_pages, 0);
  EXPECT_TRUE(oracle_->live.empty());
}

TEST(SpeculativeScheduler, RefusesABadPolicy) {
  const memory::KvPoolConfig kv = geometry({{0, 64}});
  const auto forward = testing::in_two_phases([](const engine::ForwardBatch&) { return engine::StepOutput{}; });
  EXPECT_THROW(Scheduler(SchedulerConfig{.context_length = 64, .speculative = {.num_draft_tokens = 0}}, kv, forward,
                         std::make_unique<spec::NgramDrafter>(1, 3)),
               std::exception);
}

}  // namespace
}  // namespace rs::sched
