// FakeModel: a stand-in for the engine's steps in scheduler tests. It stores each token in its page-table slot and
// "attends" for every token by reading back through the page tables (within each group's window): an absent or
// overwritten slot fails the step, and the sampled rows hash what they read, so a wrong page table changes tokens.
// With state slots it also plays a recurrent layer: each slot carries a running hash of its sequence's tokens, reset
// at position 0 and copied as the batch's state_copies say; a slot that is shared, missing, or not at the sequence's
// position fails the step. A verify step's state_checkpoints receive the state after their token.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "engine/forward_batch.h"
#include "memory/kv_pool.h"
#include "sched/request.h"
#include "sched/scheduler.h"
#include "spec/acceptance.h"

namespace rs::sched::testing {

// A pool geometry for scheduler tests: `page_size` tokens per page, one group per (window, num_pages) pair.
inline memory::KvPoolConfig geometry(std::vector<std::pair<int32_t, int64_t>> groups, int32_t page_size = 4) {
  memory::KvPoolConfig config;
  config.page_size = page_size;
  for (auto [window, pages] : groups) config.groups.push_back(memory::KvGroup{.window = window, .num_pages = pages});
  return config;
}

class FakeModel {
 public:
  static constexpr int32_t kVocab = 1000;

  explicit FakeModel(const memory::KvPoolConfig& geometry, int32_t num_state_slots = 0)
      : geometry_(geometry), states_(num_state_slots) {
    for (const auto& group : geometry_.groups) slots_.emplace_back(group.num_pages * geometry_.page_size, -1);
  }

  engine::StepOutput forward(const engine::ForwardBatch& batch) {
    batches_.push_back(batch);
    for (const auto& [from, to] : batch.state_copies) states_.at(to) = states_.at(from);  // before the step, in order
    const int32_t page_size = geometry_.page_size;
    auto slot_of = [&](int g, int s, int64_t pos) -> int64_t {
      const int32_t page = batch.page_tables[g][s * batch.max_pages + pos / page_size];
      return page < 0 ? -1 : int64_t{page} * page_size + pos % page_size;
    };
    for (int s = 0; s < batch.num_seqs(); ++s)
      for (int t = batch.seq_token_start[s]; t < batch.seq_token_start[s + 1]; ++t)
        for (int g = 0; g < static_cast<int>(slots_.size()); ++g) {
          const int64_t slot = slot_of(g, s, batch.positions[t]);
          if (slot < 0) throw std::runtime_error("write to an absent page");
          slots_[g][slot] = (int64_t{batch.positions[t]} << 32) | static_cast<uint32_t>(batch.token_ids[t]);
        }
    // Every token reads back what attention would (within each group's window), not only the sampled rows: a page
    // reclaimed too early inside a prefill chunk must fail the step even though no logit row reads it.
    std::vector<uint64_t> hashes(batch.positions.size());  // [token]
    for (int s = 0; s < batch.num_seqs(); ++s)
      for (int t = batch.seq_token_start[s]; t < batch.seq_token_start[s + 1]; ++t) {
        const int64_t pos = batch.positions[t];
        uint64_t hash = 1469598103934665603ull;
        for (int g = 0; g < static_cast<int>(slots_.size()); ++g) {
          for (int64_t p = first_read(g, pos); p <= pos; ++p) {
            const int64_t slot = slot_of(g, s, p);
            if (slot < 0) throw std::runtime_error("read of an absent page");
            const int64_t value = slots_[g][slot];
            if ((value >> 32) != p) throw std::runtime_error("read of a slot another position overwrote");
            hash = mix(hash, static_cast<int32_t>(value & 0xffffffff));
          }
        }
        hashes[t] = hash;
      }
    if (!states_.empty()) run_states(batch, hashes);
    engine::StepOutput output;
    for (size_t r = 0; r < batch.logit_rows.size(); ++r) {
      engine::SampledToken token;
      token.token_id = static_cast<int32_t>(hashes[batch.logit_rows[r]] % kVocab);
      // A token bitmask (structured output) moves the pick to the next allowed id, as masking the logits would.
      const auto mask = batch.sampling.empty() ? std::span<const uint32_t>() : batch.sampling[r].token_bitmask;
      for (int32_t i = 0; !mask.empty() && i < kVocab; ++i) {
        const int32_t id = (token.token_id + i) % kVocab;
        if ((mask[id / 32] >> (id % 32)) & 1u) {
          token.token_id = id;
          break;
        }
      }
      output.tokens.push_back(token);
    }
    return output;
  }

  // The tokens a correct server produces for `prompt` (greedy, until max_new or a stop token).
  std::vector<int32_t> reference(std::vector<int32_t> tokens, int32_t max_new, int32_t stop_token = -1) const {
    std::vector<int32_t> output;
    while (static_cast<int32_t>(output.size()) < max_new) {
      const int64_t pos = static_cast<int64_t>(tokens.size()) - 1;
      uint64_t hash = 1469598103934665603ull;
      for (int g = 0; g < static_cast<int>(slots_.size()); ++g)
        for (int64_t p = first_read(g, pos); p <= pos; ++p) hash = mix(hash, tokens[p]);
      if (!states_.empty()) {
        uint64_t state = kStateSeed;
        for (int64_t p = 0; p <= pos; ++p) state = mix(state, tokens[p]);
        hash ^= state;
      }
      const int32_t next = static_cast<int32_t>(hash % kVocab);
      tokens.push_back(next);
      output.push_back(next);
      if (next == stop_token) break;
    }
    return output;
  }

  const std::vector<engine::ForwardBatch>& batches() const { return batches_; }

 private:
  static constexpr uint64_t kStateSeed = 7777;
  struct SlotState {
    int64_t next_position = -1;  // position of the next token the slot expects; -1 = never used
    uint64_t hash = kStateSeed;
  };

  void run_states(const engine::ForwardBatch& batch, std::vector<uint64_t>& hashes) {
    if (static_cast<int>(batch.state_slots.size()) != batch.num_seqs())
      throw std::runtime_error("a sequence without a state slot");
    std::vector<bool> seen(states_.size(), false);
    std::vector<std::pair<int, SlotState>> checkpoints;  // (token, state after it)
    for (int s = 0; s < batch.num_seqs(); ++s) {
      const int32_t slot = batch.state_slots[s];
      if (slot < 0 || slot >= static_cast<int32_t>(states_.size()) || seen[slot])
        throw std::runtime_error("state slot missing, out of range or shared within a step");
      seen[slot] = true;
      SlotState& state = states_[slot];
      const int32_t first = batch.positions[batch.seq_token_start[s]];
      if (first == 0) state = SlotState{0, kStateSeed};
      if (state.next_position != first) throw std::runtime_error("state slot is not at the sequence's position");
      for (int t = batch.seq_token_start[s]; t < batch.seq_token_start[s + 1]; ++t) {
        state.hash = mix(state.hash, batch.token_ids[t]);
        ++state.next_position;
        hashes[t] ^= state.hash;
        if (!batch.state_checkpoints.empty() && batch.state_checkpoints[t] >= 0) checkpoints.emplace_back(t, state);
      }
    }
    if (!batch.state_checkpoints.empty() && batch.state_checkpoints.size() != batch.positions.size())
      throw std::runtime_error("state checkpoints do not cover the step's tokens");
    for (const auto& [t, state] : checkpoints) {
      const int32_t slot = batch.state_checkpoints[t];
      if (slot >= static_cast<int32_t>(states_.size()) || seen[slot])
        throw std::runtime_error("state checkpoint slot out of range or a sequence's own slot");
      seen[slot] = true;
      states_[slot] = state;
    }
  }

  int64_t first_read(int g, int64_t pos) const {
    const int32_t window = geometry_.groups[g].window;
    return window > 0 ? std::max<int64_t>(0, pos - window + 1) : 0;
  }
  static uint64_t mix(uint64_t hash, int32_t token) { return (hash ^ static_cast<uint32_t>(token)) * 1099511628211ull; }

  memory::KvPoolConfig geometry_;
  std::vector<std::vector<int64_t>> slots_;  // [group][page * page_size + offset] = position << 32 | token
  std::vector<engine::ForwardBatch> batches_;
  std::vector<SlotState> states_;  // [state slot]
};

// The scheduler's two-phase steps over a one-phase `forward`: launch keeps the batch, sample runs `forward` on it
// (after the scheduler filled the rows' grammar masks, as the engine samples then).
inline StepFunctions in_two_phases(std::function<engine::StepOutput(const engine::ForwardBatch&)> forward) {
  auto launched = std::make_shared<const engine::ForwardBatch*>(nullptr);
  return StepFunctions{.launch = [launched](const engine::ForwardBatch& batch) { *launched = &batch; },
                       .sample = [launched, forward = std::move(forward)] { return forward(**launched); }};
}

// What a test knows of one submitted request: its prompt, the tokens streamed back and how it ended.
struct Tracked {
  std::shared_ptr<TokenStream> stream = std::make_shared<TokenStream>();
  std::vector<int32_t> prompt, output;
  FinishReason reason = FinishReason::kNone;
  std::string error;
  ErrorCause error_cause = ErrorCause::kServer;
  bool stop_token = false;             // the final event said its last token is a stop token
  int32_t cached_tokens = -1;          // from the first event
  int32_t events_with_queue_time = 0;  // must be exactly one (the first) for a request that produced tokens
  spec::SpecTotals totals;             // the latest event's speculative-decoding figures
};

// The requests a scheduler test submitted and what came back for each (one copy of submit / collect / run for every
// scheduler test).
class Requests {
 public:
  // Submits `request` with a tracked stream; the record of it.
  Tracked* submit(Scheduler& scheduler, std::unique_ptr<Request> request) {
    auto tracked = std::make_unique<Tracked>();
    tracked->prompt = request->prompt_ids;
    request->stream = tracked->stream;
    EXPECT_TRUE(scheduler.submit(std::move(request)));
    tracked_.push_back(std::move(tracked));
    return tracked_.back().get();
  }
  // A greedy request (the next id) of `prompt`.
  Tracked* submit(Scheduler& scheduler, std::vector<int32_t> prompt, int32_t max_new, std::vector<int32_t> stops = {}) {
    return submit(scheduler, make_request(std::move(prompt), max_new, std::move(stops)));
  }
  std::unique_ptr<Request> make_request(std::vector<int32_t> prompt, int32_t max_new, std::vector<int32_t> stops = {}) {
    auto request = std::make_unique<Request>();
    request->id = next_id_++;
    request->prompt_ids = std::move(prompt);
    request->max_new_tokens = max_new;
    request->stop_token_ids = std::move(stops);
    request->sampling.temperature = 0.0f;
    return request;
  }
  // Drains every stream into its record.
  void collect() {
    for (auto& t : tracked_)
      while (auto event = t->stream->events.try_pop()) {
        if (t->cached_tokens < 0) t->cached_tokens = event->cached_tokens;
        if (event->queue_seconds >= 0) {
          EXPECT_TRUE(t->output.empty()) << "queue time reported after the first token";
          ++t->events_with_queue_time;
        }
        for (const auto& token : event->tokens) t->output.push_back(token.token_id);
        t->totals = event->speculative;
        if (event->finished) {
          t->reason = event->finish_reason;
          t->error = event->error;
          t->error_cause = event->error_cause;
          t->stop_token = event->stop_token;
        }
      }
  }
  bool all_finished() const {
    for (const auto& t : tracked_)
      if (t->reason == FinishReason::kNone) return false;
    return true;
  }
  // Steps `scheduler` until every request finished (at most max_steps), collecting after each step; whether all did.
  bool run(Scheduler& scheduler, int max_steps = 100000) {
    for (int step = 0; step < max_steps && !all_finished(); ++step) {
      scheduler.step();
      collect();
    }
    return all_finished();
  }
  const std::vector<std::unique_ptr<Tracked>>& all() const { return tracked_; }
  void clear() { tracked_.clear(); }

 private:
  std::vector<std::unique_ptr<Tracked>> tracked_;
  uint64_t next_id_ = 1;
};

}  // namespace rs::sched::testing
