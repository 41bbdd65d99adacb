#include "sched/scheduler.h"

#include <algorithm>
#include <chrono>
#include <new>

#include "base/clock.h"
#include "base/error.h"
#include "base/log.h"
#include "grammar/matcher.h"

namespace rs::sched {

Scheduler::Scheduler(const SchedulerConfig& config, const memory::KvPoolConfig& kv_geometry, StepFunctions steps,
                     std::unique_ptr<spec::Drafter> drafter)
    : config_(config),
      steps_(std::move(steps)),
      drafter_(std::move(drafter)),
      memory_(kv_geometry, memory::MemoryConfig{.prefix_cache = config.prefix_cache,
                                                .num_state_slots = config.num_state_slots,
                                                .state_snapshot_interval = config.state_snapshot_interval}) {
  memory_.set_event_sink(config_.kv_events);
  RS_CHECK(config_.max_running_requests > 0, "max_running_requests must be positive");
  RS_CHECK(config_.max_prefill_tokens > 0 && config_.chunked_prefill_size > 0,
           "max_prefill_tokens and chunked_prefill_size must be positive");
  RS_CHECK(config_.context_length > 0, "context length must be positive");
  RS_CHECK(!drafter_ || (config_.speculative.num_draft_tokens > 0 && config_.speculative.max_batch > 0),
           "speculative decoding needs positive draft tokens and batch limit");
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
  size_token_bitmasks(items);
  engine::ForwardBatch batch = build_forward_batch(items, memory_.num_groups());
  MaskFailures mask_failures;
  memory::StepCopies copies = memory_.take_step_copies();
  batch.state_copies = copies.copies;
  engine::StepOutput output;
  const auto forward_start = Clock::now();
  try {
    steps_.launch(batch);
    mask_failures = fill_token_bitmasks(items);  // while the device runs the forward
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
      drop_draft(*item.seq);
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
  counters_.forward_seconds += seconds_since(forward_start);
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
  schedule_drafts(items);  // last: drafts are optional and take only pages nothing else needed this step
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

void Scheduler::schedule_drafts(std::vector<StepItem>& items) {
  if (!drafter_) return;
  const spec::SpeculativeConfig& policy = config_.speculative;
  std::vector<StepItem*> decodes;
  for (StepItem& item : items)
    if (item.end - item.begin == 1 && item.samples()) decodes.push_back(&item);
  if (decodes.empty() || static_cast<int32_t>(decodes.size()) > policy.max_batch) return;
  std::vector<spec::DraftRequest> requests;
  std::vector<StepItem*> drafting;
  for (StepItem* item : decodes) {
    Sequence& seq = *item->seq;
    // Constrained output would need the grammar advanced along the draft; such sequences decode one token a step.
    if (seq.request->grammar || !seq.spec.should_draft(seq.num_output())) continue;
    // The step emits up to draft + 1 tokens, within max_new_tokens and the context.
    const int64_t room =
        std::min<int64_t>(seq.request->max_new_tokens - seq.num_output(), config_.context_length - seq.num_tokens()) -
        1;
    const int32_t max_tokens = static_cast<int32_t>(std::min<int64_t>(policy.num_draft_tokens, room));
    if (max_tokens <= 0) continue;
    spec::DraftRequest request{.id = seq.request->id, .tokens = seq.tokens, .max_tokens = max_tokens};
    if (config_.feature_group >= 0) request.feature_pages = seq.memory.kv.pages[config_.feature_group];
    requests.push_back(request);
    drafting.push_back(item);
  }
  if (requests.empty()) return;
  try {
    drafter_->propose(requests);
  } catch (const std::exception& e) {
    RS_LOG_WARN("drafting failed; this step decodes without drafts: {}", e.what());
    return;
  }
  for (size_t i = 0; i < requests.size(); ++i) {
    StepItem& item = *drafting[i];
    Sequence& seq = *item.seq;
    const auto& draft = requests[i].draft;
    const int64_t wanted = std::min<int64_t>(static_cast<int64_t>(draft.size()), requests[i].max_tokens);
    if (wanted <= 0) continue;
    // Pages for the draft positions only if free (or evictable) now: a draft never preempts anything. Recurrent
    // state (hybrid models) needs a free slot per draft token to roll back to; snapshots are not evicted for them.
    const int64_t slots = seq.memory.state_slot >= 0 ? memory_.free_state_slots() : wanted;
    const int64_t reserved = memory_.reserve(seq.memory, seq.kv_len, item.end + std::min(wanted, slots));
    const int64_t length = std::min({wanted, slots, reserved - item.end});
    if (length <= 0) continue;
    seq.tokens.insert(seq.tokens.end(), draft.begin(), draft.begin() + length);
    seq.num_draft = static_cast<int32_t>(length);
    if (seq.memory.state_slot >= 0)
      for (int64_t i = 0; i < length; ++i) memory_.take_checkpoint(seq.memory);
    item.end = seq.num_tokens();
  }
}

void Scheduler::drop_draft(Sequence& seq) {
  seq.tokens.resize(seq.tokens.size() - seq.num_draft);
  seq.num_draft = 0;
  memory_.drop_checkpoints(seq.memory);
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

FinishReason Scheduler::stop_reason(const Sequence& seq, int32_t token) const {
  const auto& stops = seq.request->stop_token_ids;
  if (std::find(stops.begin(), stops.end(), token) != stops.end()) return FinishReason::kStop;
  if (seq.num_output() >= seq.request->max_new_tokens || seq.num_tokens() >= config_.context_length)
    return FinishReason::kLength;
  return FinishReason::kNone;
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
  const std::vector<int32_t> draft(seq.tokens.end() - drafted, seq.tokens.end());
  std::vector<int32_t> sampled;
  for (int32_t j = 0; j <= drafted; ++j) sampled.push_back(output.tokens[row + j].token_id);
  const int32_t accepted = spec::accepted_length(draft, sampled);
  // Recurrent state went through every draft token: take it back to the last accepted one (the copy runs before the
  // next step, ahead of any later use of the checkpoint slots freed here).
  if (accepted < drafted && !seq.memory.checkpoints.empty()) memory_.rollback(seq.memory, accepted);
  drop_draft(seq);
  seq.spec.record(drafted, accepted, seq.num_output(), config_.speculative);
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

TokenEvent Scheduler::start_event(Sequence& seq) {
  TokenEvent event;
  event.choice_index = seq.request->choice_index;
  event.speculative = seq.spec.totals();
  if (!seq.first_event_sent) {
    seq.first_event_sent = true;
    event.prompt_tokens = seq.num_prompt;
    event.cached_tokens = seq.cached_tokens;
    event.queue_seconds = seq.queue_seconds;
    event.prompt_logprobs = std::move(seq.prompt_logprobs);
  }
  return event;
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
    event.finish_reason = stop_reason(seq, sampled.token_id);
    const auto& stops = seq.request->stop_token_ids;
    event.stop_token = std::find(stops.begin(), stops.end(), sampled.token_id) != stops.end();
  }
  event.finished = event.finish_reason != FinishReason::kNone;
  if (event.finished) finish(seq, event.finish_reason);
  return true;
}

void Scheduler::size_token_bitmasks(const std::vector<StepItem>& items) {
  for (const StepItem& item : items)
    if (item.seq->grammar_active && item.samples())
      item.seq->token_bitmask.resize(grammar::bitmask_words(config_.vocab_size));
}

Scheduler::MaskFailures Scheduler::fill_token_bitmasks(const std::vector<StepItem>& items) {
  MaskFailures failures;
  for (const StepItem& item : items) {
    Sequence& seq = *item.seq;
    if (!seq.grammar_active || !item.samples()) continue;
    try {
      seq.request->grammar->fill_next_token_bitmask(seq.token_bitmask, seq.request->stop_token_ids);
      const int32_t alternative = seq.request->grammar_or_token;
      if (seq.num_output() == 0 && alternative >= 0 && alternative < config_.vocab_size)
        seq.token_bitmask[alternative / 32] |= 1u << (alternative % 32);
    } catch (const std::exception& e) {
      RS_LOG_ERROR("rid={} token mask failed: {}", seq.request->id, e.what());
      std::fill(seq.token_bitmask.begin(), seq.token_bitmask.end(), ~0u);  // sampled, then discarded
      failures.emplace_back(&seq, e.what());
    }
  }
  return failures;
}

FinishReason Scheduler::advance_grammar(Sequence& seq, int32_t token, std::string& error, bool& request_error) {
  Request& request = *seq.request;
  if (!request.grammar) return FinishReason::kNone;
  if (!seq.grammar_active) {
    seq.grammar_active = token == request.grammar_after_token;
    return FinishReason::kNone;
  }
  const auto& stops = request.stop_token_ids;
  if (std::find(stops.begin(), stops.end(), token) != stops.end()) return FinishReason::kNone;  // a stop: ends it
  if (seq.num_output() == 1 && token == request.grammar_or_token) {  // the model opened its reasoning instead
    seq.grammar_active = false;
    return FinishReason::kNone;
  }
  try {
    if (!request.grammar->accept_token(token)) {
      error = fmt::format("token {} does not continue the requested structure", token);
      return FinishReason::kNone;
    }
  } catch (const std::exception& e) {
    error = fmt::format("structured output failed: {}", e.what());
    request_error = true;
    return FinishReason::kNone;
  }
  // Complete with nothing allowed after it: end here instead of sampling a forced stop token.
  return request.grammar->terminated() ? FinishReason::kStop : FinishReason::kNone;
}

void Scheduler::finish(Sequence& seq, FinishReason reason, const std::string& error, ErrorCause cause) {
  memory_.cache(seq.memory, seq.tokens, seq.kv_len);
  release_memory(seq);
  seq.finished = true;
  if (reason == FinishReason::kStop || reason == FinishReason::kLength) return;  // commit() sends the last token
  TokenEvent event;
  event.finished = true;
  event.finish_reason = reason;
  event.error = error;
  event.error_cause = reason == FinishReason::kError ? cause : ErrorCause::kServer;
  event.choice_index = seq.request->choice_index;
  event.prompt_tokens = seq.num_prompt;
  event.cached_tokens = seq.cached_tokens;
  event.speculative = seq.spec.totals();
  seq.request->stream->push(std::move(event));
}

void Scheduler::release_memory(Sequence& seq) {
  memory_.release(seq.memory);
  if (drafter_) drafter_->release(seq.request->id);
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
