// ForwardBatch: one engine step as flat arrays (prefill chunks and decode tokens mixed), built by the scheduler.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "backend/sampling.h"
#include "engine/sampling_params.h"

namespace rs::engine {

// Per logit row: what the sampler needs to pick a token for one sequence.
struct SamplingRow {
  const SamplingParams* params = nullptr;
  std::span<const int32_t> prompt_ids;  // for repetition_penalty
  std::span<const int32_t> output_ids;  // generated so far, for all penalties
  uint64_t rng_seed = 0;                // per request; combined with output_ids.size() -> deterministic
  std::span<const int32_t> stop_ids;    // banned while output_ids.size() < params->min_tokens
  // Structured output: ceil(vocab / 32) words, bit (id % 32) of word id / 32 set when token id may be sampled
  // (grammar/matcher.h fills it). Empty: every token may be.
  std::span<const uint32_t> token_bitmask;
  // >= 0: a scored row (prompt logprobs), nothing is sampled: the result is this token's logprob and rank and
  // params->prompt_logprobs alternatives, from the raw logits.
  int32_t score_target = -1;
};

struct ForwardBatch {
  // Tokens of all sequences, concatenated sequence after sequence.
  std::vector<int32_t> token_ids;        // [num_tokens]
  std::vector<int32_t> positions;        // [num_tokens] absolute 0-based positions
  std::vector<int32_t> seq_token_start;  // [num_seqs + 1] offsets into token_ids
  std::vector<int32_t> seq_kv_len;       // [num_seqs] context length after this step (last position + 1)
  // One page table per KV group (KvPool::groups()), each [num_seqs, max_pages] row-major;
  // entry = page id within that group, -1 where the page is absent (never allocated, or reclaimed
  // outside a sliding window). Page p of a sequence holds positions [p*page_size, (p+1)*page_size).
  std::vector<std::vector<int32_t>> page_tables;
  int32_t max_pages = 0;
  // The StatePool slot of each sequence ([num_seqs]) for models with recurrent (gated-delta-net) layers, else empty.
  // A sequence whose first token of the step is at position 0 starts from zero state; otherwise its slot holds the
  // state after its previous tokens.
  std::vector<int32_t> state_slots;
  // Recurrent-state slot copies {from, to} the engine makes, in order, before the step runs: snapshots of states as
  // the previous step left them (prefix caching of hybrid models), and snapshots restored into a new sequence's slot.
  std::vector<std::pair<int32_t, int32_t>> state_copies;
  // Speculative verification on hybrid models: empty, or [num_tokens] state slots that receive a copy of their
  // sequence's recurrent state after that token (-1: none), so that rejected draft tokens can be rolled back by
  // copying the state after the last accepted one into the sequence's slot. A sequence with checkpoints runs its
  // tokens one at a time (the recurrent form), as the decode steps it replaces would.
  std::vector<int32_t> state_checkpoints;
  // EAGLE-3 draft heads: per token, the row of the target's feature cache (features_from_target) or of the head's
  // own output of its previous step that feeds it (model/model.h StepInputs). Empty for other models.
  std::vector<int32_t> feature_rows;
  bool features_from_target = true;
  // DFlash drafters: the step row that each feature row feeds (its context rows; the block rows have none), as many as
  // feature_rows. Empty: one feature row per token (EAGLE-3).
  std::vector<int32_t> feature_tokens;
  // Token rows whose logits are wanted (last token of a finished prefill, a decode token, or a prompt token whose
  // successor's logprob is asked for), ascending.
  std::vector<int32_t> logit_rows;
  // One entry per logit row. Empty: the engine returns logits only (tests, scoring). Read when the step is sampled
  // (Engine::sample), not when it is launched: host work that only sampling needs (structured output's token masks)
  // fills the memory the rows point at in between, while the device runs the forward.
  std::vector<SamplingRow> sampling;

  int32_t num_tokens() const { return static_cast<int32_t>(token_ids.size()); }
  int32_t num_seqs() const { return static_cast<int32_t>(seq_kv_len.size()); }
};

// Sampling results are the backend's (backend/sampling.h).
using rs::SampledToken;
using rs::TokenLogprob;

struct StepOutput {
  std::vector<SampledToken> tokens;  // one per logit row (empty when batch.sampling is empty or for embeddings)
  std::vector<float> logits;         // [logit_rows, vocab] host f32, filled only when asked (keep_logits)
  // Embedding models (ModelConfig::embedding): one per logit row, its pooled embedding (the row's final-normed hidden
  // state, L2-normalised when the model says so); nothing is sampled.
  std::vector<std::vector<float>> embeddings;
};

}  // namespace rs::engine
