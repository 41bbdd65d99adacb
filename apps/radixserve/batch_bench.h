// BatchBench: drives B sequences through an Engine without a scheduler, for `radixserve bench one-batch`. Each
// sequence's pages and state slot come from a memory::MemoryManager (as the scheduler's do, without the prefix cache):
// pages behind a sliding window go back to the pool as the sequence grows, so one pool sized for the largest batch
// serves every batch size.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/engine.h"
#include "memory/sequence_memory.h"
#include "spec/drafter.h"

namespace rs::app {

struct BatchTimings {
  double prefill_seconds = 0;
  int32_t prefill_steps = 0;
  double decode_seconds = 0;
  std::vector<double> decode_step_seconds;  // one per decode step
  // With a grammar, per decode step: CPU seconds filling the masks and accepting the sampled tokens (both inside the
  // step's time, as in the scheduler), and whether every sequence was still constrained.
  std::vector<double> mask_fill_seconds;
  std::vector<double> accept_seconds;
  std::vector<uint8_t> all_constrained;
  // Speculative decoding's verify pass, after the decode steps at their final context: per requested draft length K,
  // the seconds of steps where every sequence carries K + 1 tokens and samples all of them.
  std::vector<std::pair<int32_t, std::vector<double>>> verify_step_seconds;
  // A draft head's proposals after the decode steps (every sequence drafting in the same steps, each fed a given
  // number of new context rows per proposal, as after a verify pass that kept that many tokens): seconds per call.
  std::vector<double> draft_seconds;
};

// What BatchBench::run times of a drafter: `drafter` reads the target's features through KV group `feature_group`
// (Engine::feature_group); each timed proposal first feeds `context_rows` newly committed positions.
struct DraftTiming {
  spec::Drafter* drafter = nullptr;
  int32_t feature_group = -1;
  int32_t context_rows = 4;
  int32_t max_tokens = 0;
};

class BatchGrammar;

// KV bytes a pool needs for `max_batch` sequences of `max_context` tokens: the full-attention pages of every sequence
// plus the window groups as memory::plan_kv_pool sizes them for that batch and step budget (plus slack for rounding).
size_t kv_bytes_for_batch(const memory::KvPoolConfig& config, int32_t max_batch, int64_t max_context,
                          int64_t max_step_tokens);

// KV bytes one decode step of `batch` sequences reads, averaged over `output_len` steps after an `input_len` prompt:
// per sequence its context length (at most the window in a windowed layer) times the K+V bytes of a token.
double kv_bytes_read_per_decode_step(const memory::KvPoolConfig& config, int32_t batch, int32_t input_len,
                                     int32_t output_len);

class BatchBench {
 public:
  // Up to `max_batch` sequences of up to `max_context` tokens; steps carry at most `max_step_tokens` tokens. Fails
  // when the engine's pool cannot hold them.
  BatchBench(engine::Engine& engine, int32_t max_batch, int32_t max_context, int64_t max_step_tokens);

  // Prefills `prompts` (one per sequence; several sequences per step, long prompts split across steps as chunked
  // prefill does), then runs `decode_steps` steps of one greedy token per sequence, each fed its own sample. With
  // `grammar`, every sampled token of a sequence whose output is not complete is constrained by its mask.
  // With `verify_drafts`, then times verify steps for each draft length (see BatchTimings::verify_step_seconds).
  // With `draft`, times its drafter after the decode steps (see BatchTimings::draft_seconds).
  BatchTimings run(const std::vector<std::vector<int32_t>>& prompts, int32_t decode_steps,
                   BatchGrammar* grammar = nullptr, std::span<const int32_t> verify_drafts = {},
                   const DraftTiming& draft = {});

 private:
  struct Chunk {
    int32_t seq = 0;    // sequence index in the batch (selects its pages)
    int32_t begin = 0;  // position of the first token
    std::span<const int32_t> ids;
    bool sample = false;  // logits for the last token (and, with rows > 1, the ones before it)
    int32_t rows = 1;     // sampled rows: the last `rows` tokens (a verify pass samples every drafted position)
    std::span<const uint32_t> token_bitmask;  // of the sampled token; empty: unconstrained
  };
  engine::ForwardBatch build_step(std::span<const Chunk> chunks, std::span<const memory::SequenceMemory> seqs);
  // Times `rounds` proposals of draft.drafter for the batch at its current lengths (BatchTimings::draft_seconds).
  void time_drafter(const DraftTiming& draft, std::span<const memory::SequenceMemory> seqs,
                    std::span<const int32_t> length, std::span<const int32_t> next, int32_t rounds,
                    BatchTimings& timings);
  // Points the sampling chunks of active sequences at their masks; true when every sampling chunk got one.
  static bool bind_masks(std::span<Chunk> chunks, const BatchGrammar& grammar);
  // Fills those masks: between Engine::launch and Engine::sample, while the device computes (as serve does).
  static void fill_masks(std::span<const Chunk> chunks, BatchGrammar& grammar);

  engine::Engine& engine_;
  int32_t max_batch_;
  int32_t max_context_;
  int64_t max_step_tokens_;
  int32_t page_size_;
  int32_t max_pages_;  // page-table row length: pages of max_context
  engine::SamplingParams greedy_{.temperature = 0.0f};
  memory::MemoryManager memory_;
};

}  // namespace rs::app
