// Scheduler: continuous batching on its own thread. Admits requests under the KV budget, mixes chunked-prefill slices
// with every running decode in each step, preempts (retract and recompute later) when KV runs out, and streams tokens.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "base/channel.h"
#include "engine/forward_batch.h"
#include "memory/kv_pool.h"
#include "memory/sequence_memory.h"
#include "sched/batch_builder.h"
#include "sched/grammar_stage.h"
#include "sched/request.h"
#include "sched/sequence.h"
#include "sched/speculation_stage.h"
#include "spec/drafter.h"
#include "spec/speculative_config.h"

namespace rs::sched {

struct SchedulerConfig {
  int32_t max_running_requests = 16;    // sequences in the running batch
  int32_t max_prefill_tokens = 8192;    // prefill tokens per step, over all sequences (decode tokens ride on top)
  int32_t chunked_prefill_size = 2048;  // prefill tokens of one sequence per step
  int32_t max_queued_requests = 2048;   // submitted but never admitted; submit() refuses beyond this
  int64_t context_length = 0;           // positions per sequence (prompt + output)
  bool prefix_cache = true;             // reuse cached prompt prefixes (the radix cache); off: recompute every prompt
  // Recurrent-state slots of a hybrid model (the engine's StatePool): one per running sequence, the rest hold
  // prefix-cache snapshots (evicted first when a sequence needs a slot); 0 = the model keeps no recurrent state.
  int32_t num_state_slots = 0;
  // Hybrid models with the prefix cache: prompts are snapshotted (their recurrent state copied to a free slot and
  // attached to the radix node there) at their last page boundary and every this many tokens (0: only there; rounded
  // down to whole pages); outputs every 64 tokens (one rolling snapshot) and on the same interval. A
  // later prompt reuses the deepest snapshotted prefix it shares.
  int32_t state_snapshot_interval = 0;
  int32_t vocab_size = 0;  // width of the model's logit rows: the size of structured output's bitmasks
  // The engine serves embeddings (ModelConfig::embedding): only embedding requests are accepted, and only there.
  bool embedding = false;
  // EAGLE-3 drafting: the KV group whose pages locate a sequence's target features (Engine::feature_group); -1: none.
  int32_t feature_group = -1;
  // Speculative decoding policy (draft length, batch limit, acceptance floor); the drafter itself is passed to the
  // constructor. Ignored without one.
  spec::SpeculativeConfig speculative;
  // KV cache events (non-owning; null: none): told on the scheduler thread of every page the prefix cache stores,
  // evicts or clears, and of the end of each step.
  memory::CacheEventSink* kv_events = nullptr;
};

// A snapshot for /metrics, taken after every step.
struct SchedulerStats {
  int32_t num_running = 0;
  int32_t num_queued = 0;                // waiting for admission, preempted sequences included
  std::vector<memory::KvGroupStats> kv;  // per KV group
  int32_t state_slots_used = 0;          // recurrent-state slots held by running sequences and snapshots
  int64_t state_snapshots = 0;           // of which prefix-cache snapshots
  uint64_t prompt_tokens = 0;            // prompt tokens of admitted requests (first admission)
  uint64_t cached_prompt_tokens = 0;     // of which reused from the prefix cache
  uint64_t generation_tokens = 0;
  uint64_t preemptions = 0;
  uint64_t steps = 0;
  double step_seconds = 0;            // wall time of the steps that ran (scheduling, forward, commit, streaming)
  double forward_seconds = 0;         // of which inside the forward function (the device's step and its host staging)
  uint64_t spec_verifies = 0;         // sequence passes that verified a draft
  uint64_t spec_draft_tokens = 0;     // draft tokens verified
  uint64_t spec_accepted_tokens = 0;  // of which accepted
  // The costs behind them: the drafter's proposals (wall time inside Drafter::propose, scheduler thread) and the
  // forward time of the steps that verified drafts.
  uint64_t spec_draft_calls = 0;
  double spec_draft_seconds = 0;
  uint64_t spec_verify_steps = 0;
  double spec_verify_step_seconds = 0;
};

// Runs one step in two phases (Engine::launch and Engine::sample in production, a fake in tests): `launch` starts the
// forward over a step's ForwardBatch, `sample` then returns a token per logit row. In between the scheduler fills the
// grammar masks the batch's sampling rows point at, while the device runs the forward. `sample` follows every
// `launch` that returned, and the batch outlives both.
struct StepFunctions {
  std::function<void(const engine::ForwardBatch&)> launch;
  std::function<engine::StepOutput()> sample;
};

class Scheduler {
 public:
  // kv_geometry: the pool's page size and groups (with num_pages), usually engine.kv_pool().config(). With a
  // drafter, decode steps of up to config.speculative.max_batch sequences verify its drafts (speculative decoding).
  Scheduler(const SchedulerConfig& config, const memory::KvPoolConfig& kv_geometry, StepFunctions steps,
            std::unique_ptr<spec::Drafter> drafter = nullptr);
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Any thread. false (the request is dropped) when max_queued_requests are waiting or the scheduler stopped.
  bool submit(std::unique_ptr<Request> request);
  // Any thread. The request ends with FinishReason::kAbort and its pages are freed at the next step; unknown ids
  // (already finished) are ignored.
  void abort(uint64_t request_id);
  // Any thread. Drops every cached page no request uses.
  void flush_cache();
  // Any thread. run() returns after aborting whatever is still queued or running.
  void stop();

  // The scheduler thread's loop: blocks while idle, steps while there is work, returns after stop().
  void run();
  // One iteration: handles messages, schedules, runs the forward pass, emits tokens. Returns false when there was
  // nothing to run. Only the thread that owns the scheduler (run(), or a test) may call it.
  bool step();

  SchedulerStats stats() const;  // any thread

 private:
  struct AbortMessage {
    uint64_t request_id;
  };
  struct FlushCacheMessage {};
  using Message = std::variant<std::unique_ptr<Request>, AbortMessage, FlushCacheMessage>;

  void handle(Message message);
  void receive(std::unique_ptr<Request> request);
  std::vector<StepItem> schedule();
  void schedule_decodes(std::vector<StepItem>& items);
  void schedule_prefills(std::vector<StepItem>& items);
  bool admit(Sequence& seq, int64_t budget, std::vector<StepItem>& items);
  void preempt_newest();
  // Drops every page reference and the state slot of `seq` (its K/V pages stay in the prefix cache if cached).
  void release_memory(Sequence& seq);
  void commit(const std::vector<StepItem>& items, const engine::StepOutput& output);
  // Prefill tokens of one sequence per step: chunked_prefill_size, less for a prompt that is scored.
  int64_t chunk_limit(const Sequence& seq) const;
  // Scored prompt rows (prompt logprobs) a step may carry: each is a logit row of the vocabulary's width, f32.
  static constexpr int64_t kScoredRowsPerStep = 256;
  int64_t scored_rows_left_ = kScoredRowsPerStep;
  // Verifies a drafted sequence against the target's samples in rows [row, row + draft + 1), keeps the accepted
  // prefix (plus the target's own next token) and sends them.
  void commit_verified(Sequence& seq, const engine::StepOutput& output, size_t row);
  // Appends one sampled token to `seq` and `event`, finishing the sequence when it stops; false when the sequence
  // failed (its error event is already sent and `event` must not be).
  bool append_token(Sequence& seq, const engine::SampledToken& sampled, TokenEvent& event);
  // cause (with kError): whose fault it is, which picks the HTTP status (request 400, server 500, memory 503).
  void finish(Sequence& seq, FinishReason reason, const std::string& error = {},
              ErrorCause cause = ErrorCause::kServer);
  void drop_finished();
  void end_all(FinishReason reason, const std::string& error);
  void publish_stats();

  SchedulerConfig config_;
  StepFunctions steps_;
  SpeculationStage speculation_;  // drafting and verification (sched/speculation_stage.h)
  memory::MemoryManager memory_;  // pages, state slots, snapshots and checkpoints of every sequence
  Channel<Message> inbox_;
  std::atomic<int32_t> never_admitted_{0};  // submitted, not yet admitted once (the queue limit)
  std::deque<std::unique_ptr<Sequence>> waiting_;
  std::vector<std::unique_ptr<Sequence>> running_;  // in admission order (oldest first)
  uint64_t admit_counter_ = 0;
  SchedulerStats counters_;  // scheduler thread's running totals
  mutable std::mutex stats_mutex_;
  SchedulerStats published_;  // guarded by stats_mutex_
};

}  // namespace rs::sched
