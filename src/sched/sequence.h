// Sequence: the scheduler's state for one live request (its tokens, how far its K/V reaches, and its memory).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "memory/sequence_memory.h"
#include "sched/request.h"
#include "spec/acceptance.h"

namespace rs::sched {

struct Sequence {
  std::unique_ptr<Request> request;
  std::vector<int32_t> tokens;  // the prompt, then every generated token
  int32_t num_prompt = 0;
  int64_t kv_len = 0;  // positions [0, kv_len) have K/V (and recurrent state) in the pool; the rest are computed next
  // What it holds in the engine's memory (KV pages, a recurrent-state slot, checkpoints): acquired at admission,
  // released at finish, abort and preemption (Scheduler::release_memory).
  memory::SequenceMemory memory;
  int32_t cached_tokens = 0;     // prompt tokens reused at first admission (reported to the client)
  bool admitted_before = false;  // true after the first admission (a preempted sequence is readmitted)
  double queue_seconds = 0;      // arrival to first admission (reported with the first event)
  bool first_event_sent = false;
  bool finished = false;        // set by Scheduler::finish; the sequence leaves the running batch after the step
  uint64_t admit_order = 0;     // larger = admitted later; the newest is preempted first
  bool grammar_active = false;  // request->grammar constrains the next token
  std::vector<uint32_t> token_bitmask;  // the next token's mask while grammar_active (engine::SamplingRow)
  // Speculative decoding. Within a step only, the last num_draft tokens are a draft the step verifies (they are
  // removed or confirmed at commit); `spec` tracks acceptance and decides whether the sequence drafts.
  int32_t num_draft = 0;
  spec::AcceptanceTracker spec;
  // Prompt logprobs (SamplingParams::prompt_logprobs): [position] the score of prompt token `position` given those
  // before it (position 0: its token id, rank 0 = unscored), filled as the prefill runs and sent with the first event.
  std::vector<engine::SampledToken> prompt_logprobs;

  int64_t num_tokens() const { return static_cast<int64_t>(tokens.size()); }
  int32_t num_output() const { return static_cast<int32_t>(tokens.size()) - num_prompt; }
  // Positions still to compute before the next token can be sampled (1 = a decode step).
  int64_t remaining() const { return num_tokens() - kv_len; }
  // Its prefill scores every prompt token (until the first event carries them away).
  bool scores_prompt() const { return request->sampling.prompt_logprobs >= 0 && !first_event_sent; }
  // Prompt tokens whose score a step over positions [begin, end) yields: each position p < num_prompt - 1 scores
  // token p + 1 (the last prompt position samples the first output token instead).
  int64_t scored_positions(int64_t begin, int64_t end) const {
    return scores_prompt() ? std::max<int64_t>(0, std::min<int64_t>(end, num_prompt - 1) - begin) : 0;
  }
  std::span<const int32_t> prompt_ids() const { return {tokens.data(), static_cast<size_t>(num_prompt)}; }
  std::span<const int32_t> output_ids() const {
    return {tokens.data() + num_prompt, static_cast<size_t>(num_output())};
  }
};

}  // namespace rs::sched
