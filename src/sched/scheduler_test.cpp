#include "sched/scheduler.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <numeric>
#include <random>
#include <thread>

#include "grammar/compiler.h"
#include "sched/fake_model_test_util.h"

namespace rs::sched {
namespace {

using testing::FakeModel;
using testing::geometry;
using testing::Tracked;

constexpr int32_t kPageSize = 4;  // geometry()'s default

class SchedulerTest : public ::testing::Test {
 protected:
  void make(const memory::KvPoolConfig& kv, SchedulerConfig config = {}) {
    if (config.context_length == 0) config.context_length = 4096;
    model_ = std::make_unique<FakeModel>(kv);
    scheduler_ = std::make_unique<Scheduler>(
        config, kv, testing::in_two_phases([this](const engine::ForwardBatch& batch) {
          if (fail_next_) {
            fail_next_ = false;
            throw std::runtime_error("device fell over");
          }
          if (out_of_memory_next_) {
            out_of_memory_next_ = false;
            throw OutOfMemory("CUDA out of memory: 2.00 GiB requested, 0.50 GiB of 79.10 free");
          }
          if (slow_) std::this_thread::sleep_for(std::chrono::milliseconds(1));
          return model_->forward(batch);
        }));
    config_ = config;
  }

  Tracked* submit(std::vector<int32_t> prompt, int32_t max_new, std::vector<int32_t> stops = {}) {
    return requests_.submit(*scheduler_, std::move(prompt), max_new, std::move(stops));
  }

  // Steps until every submitted request has finished (or gives up), collecting events.
  void run_to_completion(int max_steps = 100000) { ASSERT_TRUE(requests_.run(*scheduler_, max_steps)); }

  void collect() { requests_.collect(); }
  bool all_finished() const { return requests_.all_finished(); }

  // After all work: no sequence holds a page, only the prefix cache does; flushing it empties the pool.
  void expect_no_leaks() {
    scheduler_->step();
    SchedulerStats stats = scheduler_->stats();
    EXPECT_EQ(stats.num_running, 0);
    EXPECT_EQ(stats.num_queued, 0);
    for (const auto& group : stats.kv) EXPECT_EQ(group.used_pages, group.cached_pages) << "window " << group.window;
    scheduler_->flush_cache();
    scheduler_->step();
    for (const auto& group : scheduler_->stats().kv) EXPECT_EQ(group.used_pages, 0) << "window " << group.window;
  }

  static std::vector<int32_t> random_prompt(std::mt19937& rng, int length, int32_t first_token = -1) {
    std::vector<int32_t> prompt(length);
    for (auto& token : prompt) token = static_cast<int32_t>(rng() % 900) + 1;
    if (first_token >= 0 && length > 0) prompt[0] = first_token;
    return prompt;
  }

  SchedulerConfig config_;
  std::unique_ptr<FakeModel> model_;
  std::unique_ptr<Scheduler> scheduler_;
  testing::Requests requests_;
  bool fail_next_ = false;
  bool out_of_memory_next_ = false;
  std::atomic<bool> slow_ = false;
};

TEST_F(SchedulerTest, SingleRequestMatchesReference) {
  make(geometry({{0, 64}}));
  Tracked* s = submit({5, 6, 7, 8, 9, 10, 11}, 12);
  run_to_completion();
  EXPECT_EQ(s->reason, FinishReason::kLength);
  EXPECT_EQ(s->output, model_->reference(s->prompt, 12));
  EXPECT_EQ(s->cached_tokens, 0);
  EXPECT_EQ(s->events_with_queue_time, 1);
  expect_no_leaks();
}

TEST_F(SchedulerTest, StopTokenEndsTheRequest) {
  make(geometry({{0, 64}}));
  std::vector<int32_t> prompt = {3, 1, 4, 1, 5};
  const auto expected = model_->reference(prompt, 10);
  Tracked* s = submit(prompt, 10, {expected[2]});
  run_to_completion();
  EXPECT_EQ(s->reason, FinishReason::kStop);
  EXPECT_TRUE(s->stop_token);
  EXPECT_EQ(s->output, std::vector<int32_t>(expected.begin(), expected.begin() + 3));
}

// Mixed lengths under a small step budget, a small chunk size and a running limit: every request still gets exactly
// the tokens it gets alone, and the limits hold in every step. Variants: full attention; full + window; window only.
class MixedBatchTest : public SchedulerTest, public ::testing::WithParamInterface<int> {};

TEST_P(MixedBatchTest, SixteenRequestsMatchTheirSoloOutput) {
  const int variant = GetParam();
  memory::KvPoolConfig kv = variant == 0   ? geometry({{0, 512}})
                            : variant == 1 ? geometry({{0, 512}, {8, 512}})
                                           : geometry({{6, 512}});
  make(kv, SchedulerConfig{
               .max_running_requests = 8, .max_prefill_tokens = 40, .chunked_prefill_size = 7, .context_length = 4096});
  std::mt19937 rng(variant);
  for (int i = 0; i < 16; ++i) submit(random_prompt(rng, 1 + static_cast<int>(rng() % 90)), 1 + rng() % 25);
  run_to_completion();
  for (const auto& s : requests_.all()) {
    EXPECT_EQ(s->reason, FinishReason::kLength);
    EXPECT_EQ(s->output, model_->reference(s->prompt, static_cast<int32_t>(s->output.size())));
  }
  bool chunked = false;
  for (const auto& batch : model_->batches()) {
    EXPECT_LE(batch.num_seqs(), 8);
    int prefill_tokens = 0;
    for (int s = 0; s < batch.num_seqs(); ++s) {
      const int tokens = batch.seq_token_start[s + 1] - batch.seq_token_start[s];
      EXPECT_LE(tokens, 7);
      if (tokens > 1) prefill_tokens += tokens;
      chunked |= tokens > 1 && batch.seq_kv_len[s] < 20;
    }
    EXPECT_LE(prefill_tokens, 40);
  }
  EXPECT_TRUE(chunked);
  expect_no_leaks();
}

INSTANTIATE_TEST_SUITE_P(Groups, MixedBatchTest, ::testing::Values(0, 1, 2));

TEST_F(SchedulerTest, SecondRequestReusesASharedPrefix) {
  make(geometry({{0, 256}, {8, 256}}));
  std::mt19937 rng(7);
  const auto prefix = random_prompt(rng, 50);
  auto first = prefix, second = prefix;
  first.insert(first.end(), {1, 2, 3});
  second.insert(second.end(), {9, 8, 7, 6});
  Tracked* a = submit(first, 5);
  run_to_completion();
  Tracked* b = submit(second, 5);
  run_to_completion();
  EXPECT_EQ(a->cached_tokens, 0);
  EXPECT_EQ(b->cached_tokens, 48);  // whole pages of the shared 50 tokens
  EXPECT_EQ(b->output, model_->reference(second, 5));
  // The same prompt again reuses everything but its last page (the last token is always recomputed).
  Tracked* c = submit(second, 5);
  run_to_completion();
  EXPECT_EQ(c->cached_tokens, 52);
  EXPECT_EQ(c->output, b->output);
  expect_no_leaks();
}

TEST_F(SchedulerTest, WithoutPrefixCacheSharedPrefixesAreRecomputed) {
  make(geometry({{0, 256}, {8, 256}}), SchedulerConfig{.prefix_cache = false});
  std::mt19937 rng(7);
  const auto prompt = random_prompt(rng, 50);
  Tracked* a = submit(prompt, 5);
  run_to_completion();
  Tracked* b = submit(prompt, 5);
  run_to_completion();
  EXPECT_EQ(a->cached_tokens, 0);
  EXPECT_EQ(b->cached_tokens, 0);
  EXPECT_EQ(b->output, model_->reference(prompt, 5));
  for (const auto& group : scheduler_->stats().kv) EXPECT_EQ(group.cached_pages, 0) << "window " << group.window;
  expect_no_leaks();
}

// Shared prefixes of many lengths while the window pool is too small to keep every tail: whatever the cache
// reuses must be exactly what the window layers read, so every output still matches its reference.
TEST_F(SchedulerTest, WindowPrefixReuseUnderWindowPressure) {
  make(geometry({{0, 1024}, {8, 24}}), SchedulerConfig{.max_running_requests = 3, .context_length = 4096});
  std::mt19937 rng(11);
  std::vector<std::vector<int32_t>> stems;
  for (int i = 0; i < 3; ++i) stems.push_back(random_prompt(rng, 40));
  for (int round = 0; round < 6; ++round) {
    for (int i = 0; i < 5; ++i) {
      auto prompt = stems[rng() % stems.size()];
      prompt.resize(5 + rng() % 36);
      auto suffix = random_prompt(rng, static_cast<int>(rng() % 6));
      prompt.insert(prompt.end(), suffix.begin(), suffix.end());
      submit(prompt, 1 + static_cast<int32_t>(rng() % 6));
    }
    run_to_completion();
  }
  int reused = 0;
  for (const auto& s : requests_.all()) {
    EXPECT_EQ(s->reason, FinishReason::kLength) << s->error;
    EXPECT_EQ(s->output, model_->reference(s->prompt, static_cast<int32_t>(s->output.size())));
    reused += s->cached_tokens > 0;
  }
  EXPECT_GT(reused, 5);
  expect_no_leaks();
}

TEST_F(SchedulerTest, WindowPagesBehindEveryWindowAreReclaimed) {
  make(geometry({{0, 512}, {8, 512}}));
  Tracked* s = submit(std::vector<int32_t>(100, 3), 60);
  int64_t peak_window_pages = 0;
  while (s->reason == FinishReason::kNone) {
    scheduler_->step();
    collect();
    const auto stats = scheduler_->stats();
    peak_window_pages = std::max(peak_window_pages, stats.kv[1].used_pages - stats.kv[1].cached_pages);
  }
  EXPECT_EQ(s->output, model_->reference(s->prompt, 60));
  // The 100-token prefill writes 25 pages; decoding then holds only the pages a window of 8 can still read.
  EXPECT_LE(peak_window_pages, 4);
  expect_no_leaks();
}

TEST_F(SchedulerTest, PreemptsAndRecomputesWhenKvRunsOut) {
  // 40 pages = 160 token slots for 8 requests of 70 tokens each.
  make(geometry({{0, 40}, {8, 64}}), SchedulerConfig{.max_running_requests = 8, .context_length = 4096});
  std::mt19937 rng(3);
  for (int i = 0; i < 8; ++i) submit(random_prompt(rng, 30), 40);
  run_to_completion();
  for (const auto& s : requests_.all()) {
    EXPECT_EQ(s->reason, FinishReason::kLength);
    EXPECT_EQ(s->output, model_->reference(s->prompt, 40));
  }
  EXPECT_GT(scheduler_->stats().preemptions, 0u);
  expect_no_leaks();
}

TEST_F(SchedulerTest, AbortFreesPagesAtTheNextStep) {
  make(geometry({{0, 64}}));
  Tracked* s = submit(std::vector<int32_t>(30, 2), 100);
  Tracked* other = submit(std::vector<int32_t>(10, 4), 20);
  for (int i = 0; i < 5; ++i) scheduler_->step();
  scheduler_->abort(1);
  scheduler_->step();
  collect();
  EXPECT_EQ(s->reason, FinishReason::kAbort);
  EXPECT_EQ(scheduler_->stats().num_running, 1);
  run_to_completion();
  EXPECT_EQ(other->output, model_->reference(other->prompt, 20));
  scheduler_->abort(1);  // already gone: ignored
  expect_no_leaks();
}

TEST_F(SchedulerTest, AbortWhileQueued) {
  make(geometry({{0, 64}}), SchedulerConfig{.max_running_requests = 1, .context_length = 4096});
  submit({1, 2, 3}, 50);
  Tracked* queued = submit({4, 5, 6}, 5);
  scheduler_->step();
  scheduler_->abort(2);
  run_to_completion();
  EXPECT_EQ(queued->reason, FinishReason::kAbort);
  EXPECT_TRUE(queued->output.empty());
}

TEST_F(SchedulerTest, QueueLimitRefusesSubmissions) {
  make(geometry({{0, 64}}), SchedulerConfig{.max_queued_requests = 2, .context_length = 4096});
  submit({1}, 2);
  submit({2}, 2);
  auto request = std::make_unique<Request>();
  request->prompt_ids = {3};
  request->stream = std::make_shared<TokenStream>();
  EXPECT_FALSE(scheduler_->submit(std::move(request)));
  run_to_completion();
}

TEST_F(SchedulerTest, RequestsThatCannotFitFailAlone) {
  make(geometry({{0, 8}}), SchedulerConfig{.context_length = 64});
  Tracked* too_long = submit(std::vector<int32_t>(60, 1), 10);  // beyond the context
  Tracked* too_big = submit(std::vector<int32_t>(30, 1), 10);   // beyond the 32-token pool
  Tracked* fine = submit({1, 2}, 3);
  run_to_completion();
  EXPECT_EQ(too_long->reason, FinishReason::kError);
  EXPECT_EQ(too_big->reason, FinishReason::kError);
  EXPECT_FALSE(too_big->error.empty());
  EXPECT_TRUE(too_long->error_cause == ErrorCause::kRequest &&
              too_big->error_cause == ErrorCause::kRequest);  // the request's size: the server answers 400
  EXPECT_EQ(fine->reason, FinishReason::kLength);
}

// A prompt sharing only the first page of a cached 6-page node, in an 8-page pool with nothing running: the match
// once locked the whole node, so its unmatched 5 pages were neither evictable nor reused and admission waited
// forever (with every later request stuck behind it). Now only the matched page is locked and it runs.
TEST_F(SchedulerTest, PartialNodeMatchDoesNotWedgeAdmission) {
  make(geometry({{0, 8}}));
  std::vector<int32_t> first(24);
  std::iota(first.begin(), first.end(), 100);
  Tracked* a = submit(first, 1);
  run_to_completion();
  std::vector<int32_t> second(first.begin(), first.begin() + kPageSize);  // one shared page, then different
  for (int i = 0; i < 20; ++i) second.push_back(500 + i);
  Tracked* b = submit(second, 4);  // 28 tokens = 7 of the 8 pages
  Tracked* after = submit({7, 8, 9}, 2);
  run_to_completion(200);
  EXPECT_EQ(a->reason, FinishReason::kLength);
  EXPECT_EQ(b->reason, FinishReason::kLength) << b->error;
  EXPECT_EQ(b->cached_tokens, kPageSize);  // the shared page was reused, not flushed away
  EXPECT_EQ(b->output, model_->reference(second, 4));
  EXPECT_EQ(after->output, model_->reference(after->prompt, 2));
  expect_no_leaks();
}

TEST_F(SchedulerTest, ForwardFailureFailsOnlyThatBatch) {
  make(geometry({{0, 64}}));
  Tracked* first = submit({1, 2, 3}, 4);
  fail_next_ = true;
  scheduler_->step();
  Tracked* second = submit({1, 2, 3}, 4);
  run_to_completion();
  EXPECT_EQ(first->reason, FinishReason::kError);
  EXPECT_EQ(first->error_cause, ErrorCause::kServer);  // the device's failure: a 500
  EXPECT_EQ(second->output, model_->reference(second->prompt, 4));
  expect_no_leaks();
}

// A step whose allocation fails (device or host memory) fails its requests as overloaded (a 503: retry later), frees
// their memory, and the scheduler serves the next request, the same one again included.
TEST_F(SchedulerTest, OutOfMemoryFailsThatBatchAsOverloaded) {
  make(geometry({{0, 64}}));
  Tracked* first = submit({1, 2, 3}, 4);
  out_of_memory_next_ = true;
  scheduler_->step();
  Tracked* retry = submit({1, 2, 3}, 4);
  run_to_completion();
  EXPECT_EQ(first->reason, FinishReason::kError);
  EXPECT_EQ(first->error_cause, ErrorCause::kOverloaded);
  EXPECT_NE(first->error.find("out of memory"), std::string::npos) << first->error;
  EXPECT_NE(first->error.find("Retry later"), std::string::npos) << first->error;
  EXPECT_EQ(retry->output, model_->reference(retry->prompt, 4));
  expect_no_leaks();
}

TEST_F(SchedulerTest, RunsOnItsOwnThreadAndStops) {
  make(geometry({{0, 64}}));
  slow_ = true;
  std::thread thread([&] { scheduler_->run(); });
  auto stream = std::make_shared<TokenStream>();
  auto request = std::make_unique<Request>();
  request->id = 42;
  request->prompt_ids = {1, 2, 3};
  request->max_new_tokens = 3;
  request->stream = stream;
  ASSERT_TRUE(scheduler_->submit(std::move(request)));
  int tokens = 0;
  while (auto event = stream->events.pop()) {
    tokens += static_cast<int>(event->tokens.size());
    if (event->finished) break;
  }
  EXPECT_EQ(tokens, 3);
  auto endless = std::make_shared<TokenStream>();
  request = std::make_unique<Request>();
  request->id = 43;
  request->prompt_ids = {1, 2, 3};
  request->max_new_tokens = 200;
  request->stream = endless;
  ASSERT_TRUE(scheduler_->submit(std::move(request)));
  EXPECT_FALSE(endless->events.pop()->finished);
  scheduler_->stop();
  thread.join();
  FinishReason last = FinishReason::kNone;
  while (auto event = endless->events.try_pop())
    if (event->finished) last = event->finish_reason;
  EXPECT_EQ(last, FinishReason::kAbort);
}

// Client threads submit, abort, flush and read stats while run() steps on its own thread, as HTTP handlers do: every
// request still ends exactly once and no page leaks. scripts/test-tsan runs this under ThreadSanitizer.
TEST_F(SchedulerTest, ConcurrentClientsWhileRunning) {
  make(geometry({{0, 64}}));
  std::thread thread([&] { scheduler_->run(); });
  constexpr int kClients = 4;
  constexpr int kRequestsPerClient = 12;
  std::atomic<int> finished{0};
  std::vector<std::thread> clients;
  for (int client = 0; client < kClients; ++client)
    clients.emplace_back([&, client] {
      std::mt19937 rng(static_cast<uint32_t>(client));
      for (int i = 0; i < kRequestsPerClient; ++i) {
        auto stream = std::make_shared<TokenStream>();
        auto request = std::make_unique<Request>();
        request->id = static_cast<uint64_t>(1000 * (client + 1) + i);
        request->prompt_ids = random_prompt(rng, 3 + static_cast<int>(rng() % 12), 7);  // shared first token
        request->max_new_tokens = 1 + static_cast<int32_t>(rng() % 8);
        request->sampling.temperature = 0.0f;
        request->stream = stream;
        const uint64_t id = request->id;
        ASSERT_TRUE(scheduler_->submit(std::move(request)));
        if (i % 3 == 1) scheduler_->abort(id);
        if (i % 5 == 2) scheduler_->flush_cache();
        (void)scheduler_->stats();
        int ends = 0;
        while (auto event = stream->events.pop())
          if (event->finished && ++ends == 1) break;
        EXPECT_EQ(ends, 1);
        finished.fetch_add(1);
      }
    });
  for (auto& client : clients) client.join();
  scheduler_->stop();
  thread.join();
  EXPECT_EQ(finished.load(), kClients * kRequestsPerClient);
  SchedulerStats stats = scheduler_->stats();  // stop() closed the inbox, so expect_no_leaks() cannot flush
  EXPECT_EQ(stats.num_running, 0);
  EXPECT_EQ(stats.num_queued, 0);
  for (const auto& group : stats.kv) EXPECT_EQ(group.used_pages, group.cached_pages);
}

// Structured output: each sampled token follows the grammar (the fake model picks the next allowed id), the request
// stops when the grammar is complete, and a grammar that starts after a token leaves the tokens before it free.
TEST_F(SchedulerTest, GrammarConstrainsTokensAndEndsTheRequest) {
  std::vector<std::string> bytes(FakeModel::kVocab);
  for (int32_t id = 0; id < FakeModel::kVocab; ++id) bytes[id] = std::string(1, static_cast<char>('a' + id % 26));
  grammar::GrammarCompiler compiler(grammar::TokenVocab::from_bytes(bytes));
  const auto compiled = compiler.compile({grammar::GrammarKind::kRegex, "abc(d|e)"});
  make(geometry({{0, 64}}), SchedulerConfig{.vocab_size = FakeModel::kVocab});
  std::mt19937 rng(3);
  const std::vector<int32_t> prompt = random_prompt(rng, 20);
  const std::vector<int32_t> free_tokens = model_->reference(prompt, 2);
  const int32_t free_token = free_tokens[0];
  const auto submit_with = [&](int32_t max_new, int32_t after, int32_t alternative = -1) {
    auto request = requests_.make_request(prompt, max_new);
    request->grammar = std::make_unique<grammar::GrammarMatcher>(compiled);
    request->grammar_after_token = after;
    request->grammar_or_token = alternative;
    return requests_.submit(*scheduler_, std::move(request));
  };
  Tracked* plain = submit_with(50, -1);
  Tracked* later = submit_with(50, free_token);
  Tracked* cut = submit_with(2, -1);
  // The first token may open "reasoning" instead (the fake model's own pick, allowed beside the grammar); the
  // constraint then waits for the closing token (its next pick).
  Tracked* opened = submit_with(50, free_tokens[1], free_token);
  // Not taken (the fake model scans allowed ids upwards from its pick, and this one comes last): the grammar applies
  // from the first token.
  Tracked* direct = submit_with(50, free_tokens[1], (free_token + FakeModel::kVocab - 1) % FakeModel::kVocab);
  run_to_completion();
  const auto text = [&](const std::vector<int32_t>& ids, size_t from) {
    std::string s;
    for (size_t i = from; i < ids.size(); ++i) s += bytes[ids[i]];
    return s;
  };
  EXPECT_EQ(plain->reason, FinishReason::kStop);
  EXPECT_FALSE(plain->stop_token);  // ended by the grammar: the last token is output
  EXPECT_TRUE(text(plain->output, 0) == "abcd" || text(plain->output, 0) == "abce") << text(plain->output, 0);
  EXPECT_EQ(later->reason, FinishReason::kStop);
  ASSERT_FALSE(later->output.empty());
  EXPECT_EQ(later->output[0], free_token);
  EXPECT_TRUE(text(later->output, 1) == "abcd" || text(later->output, 1) == "abce") << text(later->output, 1);
  ASSERT_GE(opened->output.size(), 2u);
  EXPECT_EQ(opened->output[0], free_tokens[0]);
  EXPECT_EQ(opened->output[1], free_tokens[1]);
  EXPECT_TRUE(text(opened->output, 2) == "abcd" || text(opened->output, 2) == "abce") << text(opened->output, 2);
  EXPECT_TRUE(text(direct->output, 0) == "abcd" || text(direct->output, 0) == "abce") << text(direct->output, 0);
  EXPECT_EQ(cut->reason, FinishReason::kLength);
  EXPECT_EQ(text(cut->output, 0), "ab");
  expect_no_leaks();
}

// A grammar whose token mask runs past GrammarMatcher::kMaxWork mid-generation (its first mask is cheap: only "x" may
// start) fails its own request with a clear error; the request beside it runs on untouched.
TEST_F(SchedulerTest, GrammarTooComplexMidGenerationFailsOnlyItsRequest) {
  std::mt19937 rng(9);
  std::vector<std::string> bytes(FakeModel::kVocab);
  for (std::string& token : bytes) {
    token.resize(40);
    for (char& c : token) c = static_cast<char>('a' + rng() % 23);  // never 'x'
  }
  bytes[7] = "x";
  grammar::GrammarCompiler compiler(grammar::TokenVocab::from_bytes(bytes));
  const auto compiled = compiler.compile({grammar::GrammarKind::kGbnf, R"(root ::= "x" ([a-z]{0,40}){40})"});
  make(geometry({{0, 64}}), SchedulerConfig{.vocab_size = FakeModel::kVocab});
  const std::vector<int32_t> prompt = random_prompt(rng, 12);
  auto request = requests_.make_request(prompt, 8);
  request->grammar = std::make_unique<grammar::GrammarMatcher>(compiled);
  Tracked* complex = requests_.submit(*scheduler_, std::move(request));
  Tracked* plain = submit(random_prompt(rng, 9), 6);
  run_to_completion();
  EXPECT_EQ(complex->reason, FinishReason::kError);
  EXPECT_EQ(complex->output, std::vector<int32_t>{7});
  EXPECT_TRUE(complex->error.starts_with("structured output failed: grammar too complex: ")) << complex->error;
  EXPECT_EQ(complex->error_cause, ErrorCause::kRequest);  // the server answers 400: the grammar is the client's
  EXPECT_EQ(plain->error_cause, ErrorCause::kServer);
  EXPECT_EQ(plain->reason, FinishReason::kLength);
  EXPECT_EQ(plain->output, model_->reference(plain->prompt, 6));
  expect_no_leaks();
}

}  // namespace
}  // namespace rs::sched