#include "spec/draft_model_drafter.h"

#include <algorithm>

#include "base/error.h"
#include "base/log.h"
#include "engine/step_builder.h"
#include "model/model.h"

namespace rs::spec {
namespace {

const engine::SamplingParams kGreedy{.temperature = 0.0f};

}  // namespace

DraftModelDrafter::DraftModelDrafter(std::unique_ptr<engine::Engine> engine)
    : engine_(std::move(engine)),
      memory_(engine_->kv_pool().config(),
              memory::MemoryConfig{.prefix_cache = false, .num_state_slots = engine_->state_pool().num_slots()}),
      max_step_tokens_(std::max<int64_t>(engine_->config().max_step_tokens, 1)) {}

DraftModelDrafter::DraftModelDrafter(std::unique_ptr<engine::Engine> head, engine::Engine& target)
    : DraftModelDrafter(std::move(head)) {
  RS_CHECK(engine_->model_config().is_eagle3(), "{} is not an EAGLE-3 head (LlamaForCausalLMEagle3)",
           engine_->model_config().architecture);
  RS_CHECK(!target.hidden_features().empty(), "the target engine does not capture the hidden states the head reads");
  RS_CHECK(engine_->model_config().vocab_size == target.model_config().vocab_size,
           "the EAGLE-3 head's vocabulary ({} tokens) differs from the target's ({})",
           engine_->model_config().vocab_size, target.model_config().vocab_size);
  model::DraftHead* head_model = engine_->model().draft_head();
  RS_CHECK(head_model != nullptr, "{} does not run as a draft head", engine_->model_config().architecture);
  head_model->bind_target(target.model().shared_weights(), target.hidden_features());
  draft_to_target_ = head_model->draft_to_target();
  target_ = &target;
}

void DraftModelDrafter::release(uint64_t id) {
  auto it = states_.find(id);
  if (it == states_.end()) return;
  memory_.release(it->second.memory);  // with the copies still pending into its slots
  states_.erase(it);
}

bool DraftModelDrafter::trim_state(State& state, size_t keep) {
  if (!memory_.ensure_state_slot(state.memory)) return false;
  if (keep < state.tokens.size()) {
    // The slot holds the state after all of `tokens`; the checkpoint after `keep` of them replaces it (the copy runs
    // before the next forward, ahead of any reuse of the checkpoint slots freed below), or the draft starts over.
    const int64_t k = static_cast<int64_t>(keep) - state.memory.checkpoint_base;
    if (k >= 0 && k < static_cast<int64_t>(state.memory.checkpoints.size())) {
      memory_.rollback(state.memory, static_cast<size_t>(k));
    } else {
      keep = 0;  // position 0 starts from zero state
    }
  }
  state.tokens.resize(keep);
  memory_.drop_checkpoints(state.memory);
  return true;
}

void DraftModelDrafter::drop(Work& work) {
  work.request->draft.clear();
  release(work.request->id);
  work.state = nullptr;
}

bool DraftModelDrafter::reserve(Work& work, int64_t end) {
  // `begin` is the committed length, not the draft's own end: a window must keep the pages that rejected draft
  // positions, recomputed next time, will read.
  const int64_t begin = std::min<int64_t>(work.committed - 1, static_cast<int64_t>(work.state->tokens.size()));
  if (memory_.reserve(work.state->memory, begin, end) >= end) return true;
  RS_LOG_DEBUG("rid={} drafts nothing: the draft model's KV pool is full", work.request->id);
  drop(work);
  return false;
}

std::vector<int32_t> DraftModelDrafter::run(const std::vector<Item>& items, bool from_target) {
  engine::StepBuilder step(memory_.num_groups());
  step.batch().features_from_target = from_target;
  const int32_t target_page = eagle() ? target_->kv_pool().page_size() : 1;
  for (const Item& item : items) {
    const memory::SequenceMemory& memory = item.work->state->memory;
    step.add_sequence(item.tokens, item.begin, memory.kv.pages, hybrid() ? memory.state_slot : -1);
    if (eagle()) {
      for (size_t t = 0; t < item.tokens.size(); ++t) {
        const int64_t position = item.begin + static_cast<int64_t>(t);
        if (!from_target) {
          step.batch().feature_rows.push_back(item.work->output_row);
          continue;
        }
        // The target's features of this position: its KV slot in the target's feature group.
        const auto& pages = item.work->request->feature_pages;
        const int64_t page_index = position / target_page;
        RS_CHECK(page_index < static_cast<int64_t>(pages.size()) && pages[page_index] >= 0,
                 "rid={}: no target page holds the features of position {}", item.work->request->id, position);
        step.batch().feature_rows.push_back(
            static_cast<int32_t>(pages[page_index] * target_page + position % target_page));
      }
    }
    if (item.samples) step.add_logit_row(step.num_tokens() - 1, engine::SamplingRow{.params = &kGreedy});
  }
  step.batch().state_copies = memory_.take_step_copies().copies;
  const engine::ForwardBatch batch = step.finish();
  const engine::StepOutput output = engine_->forward(batch);
  for (size_t s = 0; s < items.size(); ++s) items[s].work->output_row = batch.seq_token_start[s + 1] - 1;
  std::vector<int32_t> tokens;
  for (const auto& sampled : output.tokens)
    tokens.push_back(draft_to_target_.empty() ? sampled.token_id : draft_to_target_.at(sampled.token_id));
  return tokens;
}

void DraftModelDrafter::propose(std::span<DraftRequest> requests) {
  std::vector<Work> works;
  for (DraftRequest& request : requests) {
    request.draft.clear();
    // An EAGLE-3 head reads token p + 1 at position p: the committed tokens but the first.
    const std::span<const int32_t> input =
        eagle() && !request.tokens.empty() ? request.tokens.subspan(1) : request.tokens;
    // A draft model with a shorter context stops drafting where it ends (the target goes on alone).
    if (request.max_tokens <= 0 || input.empty() || (eagle() && request.feature_pages.empty()) ||
        static_cast<int64_t>(request.tokens.size()) + request.max_tokens > engine_->context_length()) {
      release(request.id);
      continue;
    }
    State& state = states_[request.id];
    // Keep the K/V of the longest prefix the target committed (at least the last token is fed again for logits).
    const size_t limit = std::min(state.tokens.size(), input.size() - 1);
    const auto mismatch = std::mismatch(state.tokens.begin(), state.tokens.begin() + limit, input.begin());
    const size_t keep = static_cast<size_t>(mismatch.first - state.tokens.begin());
    if (!hybrid()) {
      state.tokens.resize(keep);
    } else if (!trim_state(state, keep)) {  // trims the tokens itself (to 0 when no checkpoint fits)
      RS_LOG_DEBUG("rid={} drafts nothing: the draft model's state slots are taken", request.id);
      release(request.id);
      continue;
    }
    works.push_back(Work{&request, &state, input, static_cast<int64_t>(input.size())});
  }
  // Catch up on the committed tokens the draft has not seen (the whole prompt the first time), in chunks of the
  // draft engine's step budget; the pass that reaches a request's last token samples its first draft token.
  int passes = 0;
  while (true) {
    std::vector<Item> items;
    int64_t budget = max_step_tokens_;
    for (Work& work : works) {
      if (work.state == nullptr || budget <= 0) continue;
      const int64_t have = static_cast<int64_t>(work.state->tokens.size());
      const int64_t take = std::min(work.committed - have, budget);
      if (take <= 0 || !reserve(work, have + take)) continue;
      items.push_back(Item{&work, work.input.subspan(have, take), have, have + take == work.committed});
      budget -= take;
    }
    if (items.empty()) break;
    ++passes;
    const std::vector<int32_t> sampled = run(items);
    size_t row = 0;
    for (const Item& item : items) {
      State& state = *item.work->state;
      state.tokens.insert(state.tokens.end(), item.tokens.begin(), item.tokens.end());
      if (item.samples) {
        item.work->request->draft.push_back(sampled[row++]);
        item.work->output_pass = passes;
      }
    }
  }
  // An EAGLE-3 head's next step reads the outputs of the last run only: requests caught up in an earlier pass feed
  // their last position again (the same K/V and output) so that every one has its row there.
  if (eagle() && passes > 1) {
    std::vector<Item> items;
    for (Work& work : works)
      if (work.state != nullptr && !work.request->draft.empty() && work.output_pass < passes)
        items.push_back(Item{&work, work.input.subspan(work.committed - 1, 1), work.committed - 1, true});
    if (!items.empty()) run(items);
  }
  // Then one batched decode step per further draft token: each feeds the previous draft token.
  while (true) {
    std::vector<Item> items;
    for (Work& work : works) {
      DraftRequest& request = *work.request;
      if (work.state == nullptr || request.draft.empty() ||
          static_cast<int32_t>(request.draft.size()) >= request.max_tokens)
        continue;
      const int64_t position = work.committed + static_cast<int64_t>(request.draft.size()) - 1;
      if (hybrid()) {  // keep the state before this token: the target may reject it
        memory::SequenceMemory& memory = work.state->memory;
        const int32_t checkpoint = memory_.take_checkpoint(memory);
        if (checkpoint < 0) continue;  // no slot to roll back to: the draft stops here
        if (memory.checkpoints.size() == 1) memory.checkpoint_base = position;
        memory_.copy_state(memory.state_slot, checkpoint);
      }
      if (!reserve(work, position + 1)) continue;
      items.push_back(Item{&work, std::span<const int32_t>(&request.draft.back(), 1), position, true});
    }
    if (items.empty()) break;
    const std::vector<int32_t> sampled = run(items, /*from_target=*/false);
    for (size_t i = 0; i < items.size(); ++i) {
      Work& work = *items[i].work;
      // An EAGLE-3 head's K/V of a drafted position came from its own output, not the target's features: the next
      // propose() recomputes it whatever the target accepts.
      if (!eagle()) work.state->tokens.push_back(work.request->draft.back());
      work.request->draft.push_back(sampled[i]);
    }
  }
}

}  // namespace rs::spec
