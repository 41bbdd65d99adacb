#include "sched/scheduler.h"

#include <algorithm>
#include <chrono>
#include <new>

#include "base/clock.h"
#include "base/error.h"
#include "base/log.h"
#include "sched/grammar_stage.h"
#include "sched/speculation_stage.h"
#include "sched/token_events.h"

namespace rs::sched {

Scheduler::Scheduler(const SchedulerConfig& config, const memory::KvPoolConfig& kv_geometry, StepFunctions steps,
                     std::unique_ptr<spec::Drafter> drafter)
    : config_(config),
      steps_(std::move(steps)),
      speculation_(config.speculative, std::move(drafter), config.feature_group, config.context_length),
      memory_(kv_geometry, memory::MemoryConfig{.prefix_cache = config.prefix_cache,
                                                .num_state_slots = config.num_state_slots,
                                                .state_snapshot_interval = config.state_snapshot_interval}) {
  memory_.set_event_sink(config_.kv_events);
  RS_CHECK(config_.max_running_requests > 0, "max_running_requests must be positive");
  RS_CHECK(config_.max_prefill_tokens > 0 && config_.chunked_prefill_size > 0,
           "max_prefill_tokens and chunked_prefill_size must be positive");
  RS_CHECK(config_.context_length > 0, "context length must be positive");
  publish_stats();
}

bool Scheduler::submit(std::unique_ptr<Request> request) {
  if (never_admitted_.fetch_add(1) >= config_.max_queued_requests) {
    never_admitted_.fetch_sub(1);
    return false;
  }
  if (!inbox_.push(std::move(request))) {
    never_admitted_.fetch_sub(1);
    return false;
  }
  return true;
}

void Scheduler::abort(uint64_t request_id) { inbox_.push(AbortMessage{request_id}); }
void Scheduler::flush_cache() { inbox_.push(FlushCacheMessage{}); }
void Scheduler::stop() { inbox_.close(); }

void Scheduler::run() {
  bool progressed = true;
  while (true) {
    const bool idle = waiting_.empty() && running_.empty();
    if (idle || !progressed) {
      // Idle: sleep until work arrives or stop(). Stalled (work waits but nothing could run): only a message can
      // change that, so wait for one rather than spin; the timeout merely bounds the wait. step() runs after
      // either, so the stats reflect what the message did.
      auto message = idle ? inbox_.pop() : inbox_.pop_for(std::chrono::milliseconds(100));
      if (message)
        handle(std::move(*message));
      else if (idle)
        break;  // closed and drained
    }
    if (inbox_.closed()) break;
    progressed = false;
    try {
      progressed = step();
    } catch (const std::exception& e) {
      // A bug in scheduling itself: fail what is in flight rather than the process.
      RS_LOG_ERROR("scheduler step failed: {}", e.what());
      end_all(FinishReason::kError, e.what());
    }
  }
  while (auto message = inbox_.try_pop()) handle(std::move(*message));
  end_all(FinishReason::kAbort, "server shutting down");
  publish_stats();
}

void Scheduler::handle(Message message) {
  std::visit(
      [&](auto&& m) {
        using T = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<T, std::unique_ptr<Request>>) {
          receive(std::move(m));
        } else if constexpr (std::is_same_v<T, AbortMessage>) {
          for (auto it = waiting_.begin(); it != waiting_.end(); ++it) {
            if ((*it)->request->id != m.request_id) continue;
            if (!(*it)->admitted_before) never_admitted_.fetch_sub(1);
            finish(**it, FinishReason::kAbort);
            waiting_.erase(it);
            return;
          }
          for (auto& seq : running_)
            if (seq->request->id == m.request_id) finish(*seq, FinishReason::kAbort);
          drop_finished();
        } else {
          memory_.flush_cache();
        }
      },
      std::move(message));
}

void Scheduler::receive(std::unique_ptr<Request> request) {
  auto seq = std::make_unique<Sequence>();
  seq->tokens = request->prompt_ids;
  seq->num_prompt = static_cast<int32_t>(request->prompt_ids.size());
  seq->request = std::move(request);
  if (seq->request->embed) seq->request->max_new_tokens = 0;  // the prompt's prefill is the whole request
  const int64_t total = seq->num_tokens() + seq->request->max_new_tokens;
  std::string error;
  if (seq->tokens.empty()) {
    error = "the prompt is empty";
  } else if (seq->request->embed != config_.embedding) {
    error = config_.embedding ? "this model serves embeddings only (an embedding model, or --task embed)"
                              : "this model does not serve embeddings (start it with --task embed)";
  } else if (seq->request->embed && seq->request->sampling.prompt_logprobs >= 0) {
    error = "an embedding request has no prompt logprobs";
  } else if (seq->request->max_new_tokens <
                 (seq->request->sampling.prompt_logprobs >= 0 || seq->request->embed ? 0 : 1) ||
             total > config_.context_length) {
    error = fmt::format("{} prompt + {} new tokens exceed the context length {}", seq->num_prompt,
                        seq->request->max_new_tokens, config_.context_length);
  } else if (!memory_.could_ever_fit(total)) {
    error = fmt::format("the request needs {} KV pages but the pool holds {}", memory_.full_pages_for(total),
                        memory_.full_pages_total());
  }
  const ErrorCause cause = error.empty() ? ErrorCause::kServer : ErrorCause::kRequest;  // its size; below: ours
  if (error.empty() && seq->request->grammar && config_.vocab_size <= 0)
    error = "structured output is not available: the scheduler has no vocabulary size";
  seq->grammar_active = seq->request->grammar != nullptr &&
                        (seq->request->grammar_after_token < 0 || seq->request->grammar_or_token >= 0);
  if (!error.empty()) {
    never_admitted_.fetch_sub(1);
    finish(*seq, FinishReason::kError, error, cause);
    return;
  }
  waiting_.push_back(std::move(seq));
}

bool Scheduler::step() {
  const auto step_start = Clock::now();
  while (auto message = inbox_.try_pop()) handle(std::move(*message));
  std::vector<StepItem> items = schedule();
  if (items.empty()) {
    publish_stats();
    return false;
  }
  size_token_bitmasks(items, config_.vocab_size);
  engine::ForwardBatch batch = build_forward_batch(items, memory_.num_groups());
  MaskFailures mask_failures;
  memory::StepCopies copies = memory_.take_step_copies();
  batch.state_copies = copies.copies;
  engine::StepOutput output;
  const auto forward_start = Clock::now();
  try {
    steps_.launch(batch);
    mask_failures = fill_token_bitmasks(items, config_.vocab_size);  // while the device runs the forward
    output = steps_.sample();
    const size_t results = config_.embedding ? output.embeddings.size() : output.tokens.size();
    RS_CHECK(results == batch.logit_rows.size(), "forward returned {} {} for {} logit rows", results,
             config_.embedding ? "embeddings" : "tokens", batch.logit_rows.size());
  } catch (const std::exception& e) {
    // A failed allocation (the device's memory, or the host's on CPU) fails this step's requests as "overloaded":
    // the server keeps running and a retry may fit once other requests finish.
    const bool memory = dynamic_cast<const OutOfMemory*>(&e) != nullptr || dynamic_cast<const std::bad_alloc*>(&e);
    RS_LOG_ERROR("forward failed for a batch of {} sequences{}: {}", items.size(),
                 memory ? " (out of memory: its requests are answered 503)" : "", e.what());
    memory_.step_failed(copies);
    for (const StepItem& item : items) {
      SpeculationStage::drop_draft(*item.seq, memory_);
      finish(*item.seq, FinishReason::kError,
             memory ? fmt::format("The server ran out of memory for this request's step ({}). Retry later.", e.what())
                    : e.what(),
             memory ? ErrorCause::kOverloaded : ErrorCause::kServer);
    }
    drop_finished();
    publish_stats();
    return true;
  }
  ++counters_.steps;
  const double forward_seconds = seconds_since(forward_start);
  counters_.forward_seconds += forward_seconds;
  if (std::any_of(items.begin(), items.end(), [](const StepItem& item) { return item.seq->num_draft > 0; })) {
    ++counters_.spec_verify_steps;
    counters_.spec_verify_step_seconds += forward_seconds;
  }
  for (const auto& [seq, error] : mask_failures)
    finish(*seq, FinishReason::kError, fmt::format("structured output failed: {}", error), ErrorCause::kRequest);
  commit(items, output);
  drop_finished();
  counters_.step_seconds += seconds_since(step_start);
  publish_stats();
  return true;
}

std::vector<StepItem> Scheduler::schedule() {
  std::vector<StepItem> items;
  schedule_decodes(items);
  schedule_prefills(items);
  // Last: drafts are optional and take only pages nothing else needed this step.
  const auto draft_start = Clock::now();
  if (speculation_.propose(items, memory_)) {
    ++counters_.spec_draft_calls;
    counters_.spec_draft_seconds += seconds_since(draft_start);
  }
  if (items.empty() && !running_.empty()) {
    // Every running sequence is a prefill starved of pages: retract the newest so the others can move on.
    if (running_.size() == 1) {
      finish(*running_.front(), FinishReason::kError, "KV cache too small for this request", ErrorCause::kRequest);
      drop_finished();
    } else {
      preempt_newest();
    }
  }
  return items;
}

void Scheduler::schedule_decodes(std::vector<StepItem>& items) {
  // Decodes go first and are never skipped for prefill, so prefill-first admission cannot starve them.
  for (size_t i = 0; i < running_.size();) {
    Sequence* seq = running_[i].get();
    if (seq->remaining() != 1) {
      ++i;
      continue;
    }
    bool retracted = false;
    while (memory_.reserve(seq->memory, seq->kv_len, seq->kv_len + 1) == seq->kv_len) {
      retracted = running_.back().get() == seq;  // out of KV: the newest sequence goes back to the queue
      preempt_newest();
      if (retracted) break;
    }
    if (retracted) continue;
    items.push_back(StepItem{seq, seq->kv_len, seq->kv_len + 1});
    ++i;
  }
}

void Scheduler::schedule_prefills(std::vector<StepItem>& items) {
  int64_t budget = config_.max_prefill_tokens;
  scored_rows_left_ = kScoredRowsPerStep;
  for (auto& seq : running_) {
    if (seq->remaining() <= 1 || budget <= 0) continue;
    const int64_t want = std::min<int64_t>({seq->remaining(), chunk_limit(*seq), budget});
    if (want <= 0) continue;  // a scored prompt waits for a step with scored rows left
    const int64_t end =
        memory_.reserve(seq->memory, seq->kv_len, memory_.chunk_end(seq->num_prompt, seq->kv_len, seq->kv_len + want));
    if (end == seq->kv_len) continue;
    items.push_back(StepItem{seq.get(), seq->kv_len, end});
    scored_rows_left_ -= seq->scored_positions(seq->kv_len, end);
    budget -= end - seq->kv_len;
  }
  while (budget > 0 && !waiting_.empty() && static_cast<int32_t>(running_.size()) < config_.max_running_requests) {
    Sequence& head = *waiting_.front();
    if (!admit(head, budget, items)) {
      if (!running_.empty()) break;  // running sequences will free pages as they finish
      // Nothing runs, so nothing will ever free pages for the head: drop the whole prefix cache and try once more,
      // and fail the head if even the empty pool cannot take it, rather than block every request behind it.
      memory_.flush_cache();
      if (!admit(head, budget, items)) {
        const std::string error = fmt::format(
            "the prompt needs {} KV pages but the pool has {} (of {}) free with nothing running",
            memory_.full_pages_for(head.num_tokens()), memory_.full_pages_available(), memory_.full_pages_total());
        RS_LOG_WARN("rid={} cannot be admitted: {}", head.request->id, error);
        if (!head.admitted_before) never_admitted_.fetch_sub(1);
        finish(head, FinishReason::kError, error);
        waiting_.pop_front();
        continue;
      }
    }
    budget -= items.back().end - items.back().begin;
    running_.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
  }
}

bool Scheduler::admit(Sequence& seq, int64_t budget, std::vector<StepItem>& items) {
  // A prompt whose logprobs are asked for is computed in full: a cached prefix would have no logits. A hybrid model
  // resumes only from a recurrent-state snapshot: its prefix ends at one.
  const int64_t reused = memory_.acquire(seq.memory, seq.tokens, seq.scores_prompt() ? 0 : seq.num_tokens() - 1);
  if (reused < 0) return false;  // every state slot is held: a running sequence frees one when it ends
  const int64_t want = std::min<int64_t>({seq.num_tokens() - reused, chunk_limit(seq), budget});
  // Admit only when the whole remaining prompt fits beside a page of growth for every running sequence; decode
  // growth beyond that is covered by preemption. (want <= 0: a scored prompt whose step has no scored rows left.)
  const int64_t end =
      want > 0 && memory_.fits(seq.num_tokens(), reused, static_cast<int64_t>(running_.size()))
          ? memory_.reserve(seq.memory, reused, memory_.chunk_end(seq.num_prompt, reused, reused + want))
          : reused;
  if (end == reused) {
    memory_.release(seq.memory);
    return false;
  }
  seq.kv_len = reused;
  seq.admit_order = ++admit_counter_;
  if (!seq.admitted_before) {
    seq.admitted_before = true;
    seq.cached_tokens = static_cast<int32_t>(reused);
    seq.queue_seconds = std::chrono::duration<double>(Clock::now() - seq.request->arrival).count();
    never_admitted_.fetch_sub(1);
    counters_.prompt_tokens += seq.num_prompt;
    counters_.cached_prompt_tokens += std::min<int64_t>(reused, seq.num_prompt);
  }
  items.push_back(StepItem{&seq, reused, end});
  scored_rows_left_ -= seq.scored_positions(reused, end);
  return true;
}

void Scheduler::preempt_newest() {
  std::unique_ptr<Sequence> seq = std::move(running_.back());
  running_.pop_back();
  RS_LOG_DEBUG("rid={} preempted at {} tokens", seq->request->id, seq->kv_len);
  memory_.cache(seq->memory, seq->tokens, seq->kv_len);  // a later readmission can reuse what was computed
  release_memory(*seq);
  seq->kv_len = 0;
  ++counters_.preemptions;
  waiting_.push_front(std::move(seq));
}

int64_t Scheduler::chunk_limit(const Sequence& seq) const {
  // A scored prompt's chunk is a logit row per token: what is left of the step's scored-row budget bounds it.
  return seq.scores_prompt() ? std::min<int64_t>(config_.chunked_prefill_size, scored_rows_left_)
                             : config_.chunked_prefill_size;
}

void Scheduler::commit(const std::vector<StepItem>& items, const engine::StepOutput& output) {
  size_t row = 0;
  for (const StepItem& item : items) {
    Sequence& seq = *item.seq;
    const int64_t scored = seq.scored_positions(item.begin, item.end);
    if (seq.scores_prompt() && seq.prompt_logprobs.empty()) {  // a one-token prompt scores nothing, yet has its entry
      seq.prompt_logprobs.resize(static_cast<size_t>(seq.num_prompt));
      seq.prompt_logprobs[0].token_id = seq.tokens[0];  // rank 0: nothing precedes it, no score
    }
    if (scored > 0) {
      for (int64_t p = 0; p < scored; ++p) seq.prompt_logprobs[item.begin + p + 1] = output.tokens[row++];
    }
    if (seq.finished) {  // its token mask failed during the forward (fill_token_bitmasks): nothing to commit
      if (item.samples()) row += static_cast<size_t>(seq.num_draft) + 1;
      continue;
    }
    if (seq.num_draft > 0) {
      const size_t rows = static_cast<size_t>(seq.num_draft) + 1;
      commit_verified(seq, output, row);
      row += rows;
      continue;
    }
    seq.kv_len = item.end;
    memory_.commit(seq.memory, seq.tokens, seq.num_prompt, item.begin, item.end);  // caching, state snapshots
    if (!item.samples()) continue;
    TokenEvent event = start_event(seq);
    if (seq.request->embed) {  // the last prompt row's embedding ends the request
      RS_CHECK(row < output.embeddings.size(), "an embedding request's step returned no embedding for row {}", row);
      event.embedding = output.embeddings[row++];
      event.finished = true;
      event.finish_reason = FinishReason::kStop;
      finish(seq, FinishReason::kStop);
      seq.request->stream->push(std::move(event));
      continue;
    }
    if (seq.request->max_new_tokens == 0) {  // scoring only (prompt logprobs): the sampled token is not output
      ++row;
      event.finished = true;
      event.finish_reason = FinishReason::kLength;
      finish(seq, FinishReason::kLength);
      seq.request->stream->push(std::move(event));
      continue;
    }
    if (append_token(seq, output.tokens[row++], event)) seq.request->stream->push(std::move(event));
  }
}

void Scheduler::commit_verified(Sequence& seq, const engine::StepOutput& output, size_t row) {
  const int32_t drafted = seq.num_draft;
  const int32_t accepted = speculation_.settle(seq, output, row, memory_);
  ++counters_.spec_verifies;
  counters_.spec_draft_tokens += static_cast<uint64_t>(drafted);
  counters_.spec_accepted_tokens += static_cast<uint64_t>(accepted);
  // K/V is right for the last committed token and for each accepted draft token: the kept tokens but the newest.
  seq.kv_len = seq.num_tokens();
  TokenEvent event = start_event(seq);
  for (int32_t j = 0; j <= accepted; ++j) {
    if (j > 0) ++seq.kv_len;
    if (!append_token(seq, output.tokens[row + j], event)) return;
    if (event.finished) break;
  }
  seq.request->stream->push(std::move(event));
}

bool Scheduler::append_token(Sequence& seq, const engine::SampledToken& sampled, TokenEvent& event) {
  seq.tokens.push_back(sampled.token_id);
  ++counters_.generation_tokens;
  event.tokens.push_back(sampled);
  std::string grammar_error;
  bool grammar_at_fault = false;
  event.finish_reason = advance_grammar(seq, sampled.token_id, grammar_error, grammar_at_fault);
  if (!grammar_error.empty()) {
    finish(seq, FinishReason::kError, grammar_error,
           grammar_at_fault ? ErrorCause::kRequest : ErrorCause::kServer);  // sends the final event itself
    return false;
  }
  if (event.finish_reason == FinishReason::kNone) {
    event.finish_reason = stop_reason(seq, sampled.token_id, config_.context_length);
    const auto& stops = seq.request->stop_token_ids;
    event.stop_token = std::find(stops.begin(), stops.end(), sampled.token_id) != stops.end();
  }
  event.finished = event.finish_reason != FinishReason::kNone;
  if (event.finished) finish(seq, event.finish_reason);
  return true;
}

void Scheduler::finish(Sequence& seq, FinishReason reason, const std::string& error, ErrorCause cause) {
  memory_.cache(seq.memory, seq.tokens, seq.kv_len);
  release_memory(seq);
  seq.finished = true;
  if (reason == FinishReason::kStop || reason == FinishReason::kLength) return;  // commit() sends the last token
  seq.request->stream->push(final_event(seq, reason, error, cause));
}

void Scheduler::release_memory(Sequence& seq) {
  memory_.release(seq.memory);
  speculation_.release(seq.request->id);
}

void Scheduler::drop_finished() {
  std::erase_if(running_, [](const std::unique_ptr<Sequence>& seq) { return seq->finished; });
}

void Scheduler::end_all(FinishReason reason, const std::string& error) {
  for (auto& seq : running_) finish(*seq, reason, error);
  drop_finished();
  for (auto& seq : waiting_) {
    if (!seq->admitted_before) never_admitted_.fetch_sub(1);
    finish(*seq, reason, error);
  }
  waiting_.clear();
}

void Scheduler::publish_stats() {
  if (config_.kv_events) config_.kv_events->end_step();  // after every step, as the stats
  SchedulerStats snapshot = counters_;
  snapshot.num_running = static_cast<int32_t>(running_.size());
  snapshot.num_queued = static_cast<int32_t>(waiting_.size());
  memory::MemoryStats memory = memory_.stats();
  snapshot.kv = std::move(memory.kv);
  snapshot.state_slots_used = memory.state_slots_used;
  snapshot.state_snapshots = memory.state_snapshots;
  std::lock_guard lock(stats_mutex_);
  published_ = std::move(snapshot);
}

SchedulerStats Scheduler::stats() const {
  std::lock_guard lock(stats_mutex_);
  return published_;
}

}  // namespace rs::sched
