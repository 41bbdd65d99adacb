// BatchBench (batch_bench.h): steps of B sequences (engine::StepBuilder), each with its own pages.
#include "apps/radixserve/batch_bench.h"

#include <algorithm>

#include "apps/radixserve/bench_grammar.h"
#include "base/clock.h"
#include "engine/step_builder.h"

namespace rs::app {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

size_t kv_bytes_for_batch(const memory::KvPoolConfig& config, int32_t max_batch, int64_t max_context,
                          int64_t max_step_tokens) {
  const int64_t step_pages = ceil_div(max_step_tokens, config.page_size);
  size_t total = 0;
  for (const memory::KvGroup& group : config.groups) {
    // Full attention: every sequence's pages plus one of slack (the budget travels as GiB in a double).
    const int64_t pages =
        group.window == 0 ? max_batch * ceil_div(max_context, config.page_size) + 1
                          : 2 * (max_batch * memory::pages_needed(group, config.page_size, group.window) + step_pages);
    total += pages * memory::page_bytes(config, group);
  }
  return total;
}

double kv_bytes_read_per_decode_step(const memory::KvPoolConfig& config, int32_t batch, int32_t input_len,
                                     int32_t output_len) {
  double total = 0;
  for (int32_t step = 0; step < output_len; ++step) {
    const int64_t context = input_len + step + 1;  // the decoded token included
    for (const memory::KvGroup& group : config.groups) {
      const int64_t tokens = group.window > 0 ? std::min<int64_t>(context, group.window) : context;
      total += static_cast<double>(tokens) * memory::page_bytes(config, group) / config.page_size;
    }
  }
  return output_len > 0 ? batch * total / output_len : 0.0;
}

BatchBench::BatchBench(engine::Engine& engine, int32_t max_batch, int32_t max_context, int64_t max_step_tokens)
    : engine_(engine),
      max_batch_(max_batch),
      max_context_(max_context),
      max_step_tokens_(max_step_tokens),
      memory_(engine.kv_pool().config(),
              memory::MemoryConfig{.prefix_cache = false, .num_state_slots = engine.state_pool().num_slots()}) {
  const memory::KvPool& pool = engine.kv_pool();
  page_size_ = pool.page_size();
  max_pages_ = static_cast<int32_t>(ceil_div(max_context, page_size_));
  RS_CHECK(engine.context_length() >= max_context, "sequences of {} tokens exceed the engine's context length {}",
           max_context, engine.context_length());
  for (int g = 0; g < pool.num_groups(); ++g) {
    const memory::KvGroup& group = pool.group(g);
    const int64_t needed =
        group.window == 0 ? int64_t{max_batch} * max_pages_ : max_batch * (ceil_div(group.window, page_size_) + 1);
    RS_CHECK(group.num_pages >= needed,
             "KV group {} (window {}) has {} pages; {} sequences of {} tokens need {}: raise --kv-cache-gb", g,
             group.window, group.num_pages, max_batch, max_context, needed);
  }
  const int32_t state_slots = engine.state_pool().num_slots();
  RS_CHECK(state_slots == 0 || state_slots >= max_batch,
           "{} recurrent-state slots for batches of {} sequences: raise --num-state-slots", state_slots, max_batch);
}

engine::ForwardBatch BatchBench::build_step(std::span<const Chunk> chunks,
                                            std::span<const memory::SequenceMemory> seqs) {
  engine::StepBuilder step(engine_.kv_pool().num_groups());
  for (const Chunk& chunk : chunks) {
    const memory::SequenceMemory& seq = seqs[chunk.seq];
    step.add_sequence(chunk.ids, chunk.begin, seq.kv.pages, seq.state_slot);
    if (chunk.sample)
      for (int32_t row = step.num_tokens() - chunk.rows; row < step.num_tokens(); ++row)
        step.add_logit_row(row, engine::SamplingRow{.params = &greedy_, .token_bitmask = chunk.token_bitmask});
  }
  engine::ForwardBatch batch = step.finish(max_pages_);
  batch.state_copies = memory_.take_step_copies().copies;
  return batch;
}

bool BatchBench::bind_masks(std::span<Chunk> chunks, const BatchGrammar& grammar) {
  bool all = true;
  for (Chunk& chunk : chunks) {
    if (!chunk.sample) continue;
    if (grammar.active(chunk.seq)) {
      chunk.token_bitmask = grammar.mask(chunk.seq);
    } else {
      all = false;
    }
  }
  return all;
}

void BatchBench::fill_masks(std::span<const Chunk> chunks, BatchGrammar& grammar) {
  for (const Chunk& chunk : chunks)
    if (chunk.sample && !chunk.token_bitmask.empty()) grammar.fill_mask(chunk.seq);
}

BatchTimings BatchBench::run(const std::vector<std::vector<int32_t>>& prompts, int32_t decode_steps,
                             BatchGrammar* grammar, std::span<const int32_t> verify_drafts, const DraftTiming& draft) {
  const int32_t batch_size = static_cast<int32_t>(prompts.size());
  RS_CHECK(batch_size > 0 && batch_size <= max_batch_, "batch of {} sequences (1 to {} allowed)", batch_size,
           max_batch_);
  std::vector<int32_t> length(batch_size, 0), next(batch_size, 0);
  const int32_t max_draft = verify_drafts.empty() ? 0 : *std::max_element(verify_drafts.begin(), verify_drafts.end());
  for (const auto& prompt : prompts)
    RS_CHECK(!prompt.empty() &&
                 static_cast<int64_t>(prompt.size()) + decode_steps + (max_draft ? max_draft + 1 : 0) <= max_context_,
             "sequence of {} + {} (+ {} drafted) tokens exceeds {}", prompt.size(), decode_steps, max_draft,
             max_context_);
  BatchTimings timings;
  std::vector<Chunk> chunks;
  // Every sequence's pages and state slot, given back however the run ends.
  std::vector<memory::SequenceMemory> seqs(batch_size);
  struct Release {
    memory::MemoryManager& memory;
    std::vector<memory::SequenceMemory>& seqs;
    ~Release() {
      for (memory::SequenceMemory& seq : seqs) memory.release(seq);
    }
  } release{memory_, seqs};
  for (memory::SequenceMemory& seq : seqs)
    RS_CHECK(memory_.acquire(seq, {}, 0) >= 0, "no recurrent-state slot is free for a batch of {}", batch_size);
  // Makes positions [begin, begin + n) of sequence s writable; how many it could (0 when the pool has no page now).
  const auto reserve = [&](int32_t s, int64_t begin, int64_t n) {
    return memory_.reserve(seqs[s], begin, begin + n) - begin;
  };
  if (grammar) grammar->reset(batch_size);
  // Feeds a sampled token to the grammar (while the sequence is constrained).
  auto accept = [&](int32_t seq, int32_t token) {
    if (grammar && grammar->active(seq)) grammar->accept(seq, token);
  };

  // Prefill: sequences in order, each taking what is left of the step's token budget (and of its window rings).
  auto start = Clock::now();
  for (;;) {
    chunks.clear();
    int64_t budget = max_step_tokens_;
    for (int32_t s = 0; s < batch_size && budget > 0; ++s) {
      const auto& prompt = prompts[s];
      const int64_t left = static_cast<int64_t>(prompt.size()) - length[s];
      if (left == 0) continue;
      const int64_t n = reserve(s, length[s], std::min(left, budget));
      if (n == 0) continue;  // a window group's pages are taken by the chunks before it: the next step
      chunks.push_back(Chunk{s, length[s], std::span(prompt).subspan(length[s], n), n == left});
      budget -= n;
    }
    if (chunks.empty()) {
      for (int32_t s = 0; s < batch_size; ++s)
        RS_CHECK(length[s] == static_cast<int32_t>(prompts[s].size()),
                 "the KV pool cannot hold sequence {} past {} tokens: raise --kv-cache-gb", s, length[s]);
      break;
    }
    if (grammar) bind_masks(chunks, *grammar);
    const engine::ForwardBatch batch = build_step(chunks, seqs);
    const engine::StepHandle launched = engine_.launch(batch);
    if (grammar) fill_masks(chunks, *grammar);  // while the device runs the forward, as serve does
    const engine::StepOutput out = engine_.sample(launched);
    size_t row = 0;
    for (const Chunk& chunk : chunks) {
      length[chunk.seq] += static_cast<int32_t>(chunk.ids.size());
      if (!chunk.sample) continue;
      next[chunk.seq] = out.tokens.at(row++).token_id;
      accept(chunk.seq, next[chunk.seq]);
    }
    ++timings.prefill_steps;
  }
  timings.prefill_seconds = seconds_since(start);

  // Decode: one token per sequence per step, each sequence fed the token it sampled last.
  start = Clock::now();
  for (int32_t step = 0; step < decode_steps; ++step) {
    const auto step_start = Clock::now();
    chunks.clear();
    for (int32_t s = 0; s < batch_size; ++s) {
      RS_CHECK(reserve(s, length[s], 1) == 1, "the KV pool cannot hold sequence {} past {} tokens", s, length[s]);
      chunks.push_back(Chunk{s, length[s], std::span(&next[s], 1), true});
    }
    if (grammar) timings.all_constrained.push_back(bind_masks(chunks, *grammar));
    const engine::ForwardBatch batch = build_step(chunks, seqs);
    const engine::StepHandle launched = engine_.launch(batch);
    if (grammar) {
      const auto fill_start = Clock::now();
      fill_masks(chunks, *grammar);
      timings.mask_fill_seconds.push_back(seconds_since(fill_start));
    }
    const engine::StepOutput out = engine_.sample(launched);
    const auto accept_start = Clock::now();
    for (int32_t s = 0; s < batch_size; ++s) {
      next[s] = out.tokens.at(s).token_id;
      ++length[s];
      accept(s, next[s]);
    }
    if (grammar) timings.accept_seconds.push_back(seconds_since(accept_start));
    timings.decode_step_seconds.push_back(seconds_since(step_start));
  }
  timings.decode_seconds = seconds_since(start);

  if (draft.drafter != nullptr) time_drafter(draft, seqs, length, next, std::max(decode_steps, 4), timings);

  // Verify passes at the final context, as if every draft were rejected (the same positions are written again), so
  // each K is timed at the same KV length as the decode steps' last one.
  for (const int32_t draft : verify_drafts) {
    std::vector<std::vector<int32_t>> ids(batch_size);
    chunks.clear();
    for (int32_t s = 0; s < batch_size; ++s) {
      RS_CHECK(reserve(s, length[s], draft + 1) == draft + 1, "the KV pool cannot hold a verify pass of {} tokens",
               draft + 1);
      ids[s].assign(draft + 1, next[s]);
      chunks.push_back(Chunk{s, length[s], ids[s], true, draft + 1});
    }
    engine::ForwardBatch batch = build_step(chunks, seqs);
    if (memory_
            .has_state()) {  // hybrid models keep the state after each draft token, as the scheduler's verify steps do
      batch.state_checkpoints.assign(batch.token_ids.size(), -1);
      for (int32_t s = 0; s < batch_size; ++s) {
        memory_.drop_checkpoints(seqs[s]);
        for (int32_t i = 0; i < draft; ++i) {
          const int32_t slot = memory_.take_checkpoint(seqs[s]);
          RS_CHECK(slot >= 0,
                   "recurrent-state slots cannot hold {} sequences and their {} checkpoints each: raise "
                   "--num-state-slots",
                   batch_size, draft);
          batch.state_checkpoints[batch.seq_token_start[s] + i] = slot;
        }
      }
    }
    auto& seconds = timings.verify_step_seconds.emplace_back(draft, std::vector<double>()).second;
    engine_.forward(batch);  // warm: a new shape may size scratch
    for (int32_t step = 0; step < std::max(decode_steps, 4); ++step) {
      const auto step_start = Clock::now();
      engine_.forward(batch);
      seconds.push_back(seconds_since(step_start));
    }
  }
  return timings;
}

void BatchBench::time_drafter(const DraftTiming& draft, std::span<const memory::SequenceMemory> seqs,
                              std::span<const int32_t> length, std::span<const int32_t> next, int32_t rounds,
                              BatchTimings& timings) {
  // Committed tokens end with each sequence's sampled next token; the target computed every position before it. The
  // drafter reads the tokens only as its block's first token (and ignores the context rows' ids).
  const int32_t batch_size = static_cast<int32_t>(seqs.size());
  std::vector<std::vector<int32_t>> tokens(batch_size);
  int64_t shortest = max_context_;
  for (int32_t s = 0; s < batch_size; ++s) {
    tokens[s].assign(length[s] + 1, 0);
    tokens[s].back() = next[s];
    shortest = std::min<int64_t>(shortest, length[s]);
  }
  const int64_t rows = draft.context_rows;
  RS_CHECK(shortest > rows * (rounds + 1), "sequences of {} tokens are too short to time {} proposals of {} rows",
           shortest, rounds, rows);
  const auto propose = [&](int64_t behind) {  // committed = all but the last `behind` tokens
    std::vector<spec::DraftRequest> requests;
    for (int32_t s = 0; s < batch_size; ++s)
      requests.push_back(spec::DraftRequest{.id = static_cast<uint64_t>(s),
                                            .tokens = std::span(tokens[s]).first(tokens[s].size() - behind),
                                            .max_tokens = draft.max_tokens,
                                            .feature_pages = seqs[s].kv.pages.at(draft.feature_group)});
    draft.drafter->propose(requests);
  };
  propose(rows * rounds);  // catches up on the prompt (untimed)
  for (int32_t r = rounds - 1; r >= 0; --r) {
    const auto start = Clock::now();
    propose(rows * r);
    timings.draft_seconds.push_back(seconds_since(start));
  }
  for (int32_t s = 0; s < batch_size; ++s) draft.drafter->release(static_cast<uint64_t>(s));
}

}  // namespace rs::app
