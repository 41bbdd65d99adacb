// DraftModelDrafter: a small checkpoint with the target's vocabulary (e.g. Qwen3-0.6B for Qwen3-8B) drafts K tokens
// greedily, with its own engine and paged KV. Per request it keeps the tokens its KV holds; each propose() first
// trims that to what the target committed (rejected draft positions are simply recomputed), catches up on the new
// tokens in one batched pass, then runs K - 1 batched decode steps. A hybrid draft model (gated-delta-net layers) also
// holds a recurrent-state slot per request, and before each decode step copies that slot into a checkpoint slot: the
// trim at the next propose() copies the checkpoint of the kept length back (or, with none, starts over).
// An EAGLE-3 head (a draft engine whose model is LlamaForCausalLMEagle3, bound to a target engine that captures its
// hidden states) runs the same way on the committed tokens shifted by one: position p reads token p + 1 and the
// target's features of position p (the catch-up), and a draft step reads its previous step's own output instead;
// its draft-vocabulary picks map to target ids through the head's d2t table.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "engine/engine.h"
#include "memory/sequence_memory.h"
#include "spec/drafter.h"

namespace rs::spec {

class DraftModelDrafter final : public Drafter {
 public:
  // `engine` runs the draft model; a step carries at most its max_step_tokens tokens.
  explicit DraftModelDrafter(std::unique_ptr<engine::Engine> engine);
  // An EAGLE-3 head drafting for `target` (whose engine captures the layers the head reads).
  DraftModelDrafter(std::unique_ptr<engine::Engine> head, engine::Engine& target);
  void propose(std::span<DraftRequest> requests) override;
  void release(uint64_t id) override;

  const engine::Engine& engine() const { return *engine_; }
  size_t num_tracked() const { return states_.size(); }  // requests whose KV the drafter holds

 private:
  struct State {
    // Pages of positions [0, tokens.size()); hybrid draft models: the recurrent state after `tokens` (its slot), and
    // checkpoints[i] = the state after checkpoint_base + i tokens, kept while drafting.
    memory::SequenceMemory memory;
    std::vector<int32_t> tokens;
  };
  struct Work {
    DraftRequest* request;
    State* state;
    std::span<const int32_t> input;  // the tokens the draft reads: request->tokens, or (EAGLE-3) all but the first
    int64_t committed;               // input.size()
    int32_t output_row = -1;         // EAGLE-3: the row of the last run whose output feeds this request's next step
    int32_t output_pass = 0;         // EAGLE-3: the catch-up pass that produced output_row
  };
  // One forward over `items` (token ranges), sampling greedily at the last token of each item that `samples`;
  // returns the sampled tokens in item order.
  struct Item {
    Work* work;
    std::span<const int32_t> tokens;
    int64_t begin;
    bool samples;
  };
  std::vector<int32_t> run(const std::vector<Item>& items, bool from_target = true);
  // Pages for positions up to `end`; false when the draft pool cannot supply them (the request then drafts nothing).
  bool reserve(Work& work, int64_t end);
  void drop(Work& work);
  // Hybrid draft models: makes `state` hold the recurrent state after its first `keep` tokens (a checkpoint copied
  // back, or the tokens dropped to start over), then frees its checkpoints; false when it has no slot to hold any.
  bool trim_state(State& state, size_t keep);

  bool hybrid() const { return engine_->state_pool().num_slots() > 0; }
  bool eagle() const { return target_ != nullptr; }

  std::unique_ptr<engine::Engine> engine_;
  engine::Engine* target_ = nullptr;      // EAGLE-3: the engine whose features the head reads
  std::vector<int32_t> draft_to_target_;  // EAGLE-3: target id of each draft-vocabulary id
  memory::MemoryManager memory_;          // the draft model's pool: pages, state slots, checkpoints (no prefix cache)
  std::unordered_map<uint64_t, State> states_;
  int64_t max_step_tokens_;
};

}  // namespace rs::spec
