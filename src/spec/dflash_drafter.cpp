#include "spec/dflash_drafter.h"

#include <algorithm>

#include "base/error.h"
#include "base/log.h"
#include "engine/step_builder.h"
#include "model/model.h"

namespace rs::spec {
namespace {

const engine::SamplingParams kGreedy{.temperature = 0.0f};

}  // namespace

DFlashDrafter::DFlashDrafter(std::unique_ptr<engine::Engine> drafter, engine::Engine& target)
    : engine_(std::move(drafter)),
      target_(target),
      memory_(engine_->kv_pool().config(), memory::MemoryConfig{.prefix_cache = false, .num_state_slots = 0}),
      block_size_(engine_->model_config().dflash.block_size),
      mask_token_(engine_->model_config().dflash.mask_token_id),
      max_step_tokens_(std::max<int64_t>(engine_->config().max_step_tokens, 1)) {
  const loader::ModelConfig& config = engine_->model_config();
  RS_CHECK(config.is_dflash(), "{} is not a DFlash drafter (DFlashDraftModel)", config.architecture);
  RS_CHECK(!target.hidden_features().empty(), "the target engine does not capture the hidden states DFlash reads");
  RS_CHECK(
      config.vocab_size == target.model_config().vocab_size && config.hidden_size == target.model_config().hidden_size,
      "the DFlash drafter (vocabulary {}, hidden size {}) does not fit its target (vocabulary {}, hidden size {})",
      config.vocab_size, config.hidden_size, target.model_config().vocab_size, target.model_config().hidden_size);
  RS_CHECK(block_size_ <= max_step_tokens_, "the DFlash block of {} tokens exceeds the step budget of {}", block_size_,
           max_step_tokens_);
  model::DraftHead* head = engine_->model().draft_head();
  RS_CHECK(head != nullptr, "{} does not run as a draft head", config.architecture);
  head->bind_target(target.model().shared_weights(), target.hidden_features());
}

void DFlashDrafter::release(uint64_t id) {
  auto it = states_.find(id);
  if (it == states_.end()) return;
  memory_.release(it->second.memory);
  states_.erase(it);
}

void DFlashDrafter::run(const std::vector<Item>& items) {
  engine::StepBuilder step(memory_.num_groups());
  engine::ForwardBatch& batch = step.batch();
  const int32_t target_page = target_.kv_pool().page_size();
  std::vector<std::vector<int32_t>> inputs(items.size());
  std::vector<size_t> first_logit(items.size());
  size_t logit_rows = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    const Item& item = items[i];
    const DraftRequest& request = *item.request;
    const int64_t begin = item.state->seen;
    std::vector<int32_t>& tokens = inputs[i];
    tokens.assign(request.tokens.begin() + begin, request.tokens.begin() + begin + item.take);
    if (item.block) {
      tokens.push_back(request.tokens.back());
      tokens.insert(tokens.end(), block_size_ - 1, mask_token_);
    }
    const int32_t first = step.add_sequence(tokens, begin, item.state->memory.kv.pages);
    // Context rows: the target's features of their positions (rows of its feature cache, found by its KV pages).
    const auto& pages = request.feature_pages;
    for (int64_t t = 0; t < item.take; ++t) {
      const int64_t position = begin + t, page_index = position / target_page;
      RS_CHECK(page_index < static_cast<int64_t>(pages.size()) && pages[page_index] >= 0,
               "rid={}: no target page holds the features of position {}", request.id, position);
      batch.feature_rows.push_back(static_cast<int32_t>(pages[page_index] * target_page + position % target_page));
      batch.feature_tokens.push_back(first + static_cast<int32_t>(t));
    }
    first_logit[i] = logit_rows;
    if (item.block) {  // every mask row predicts the token at its own position
      for (int32_t b = 1; b < block_size_; ++b)
        step.add_logit_row(first + static_cast<int32_t>(item.take) + b, engine::SamplingRow{.params = &kGreedy});
      logit_rows += block_size_ - 1;
    }
  }
  const engine::StepOutput output = engine_->forward(step.finish());
  for (size_t i = 0; i < items.size(); ++i) {
    const Item& item = items[i];
    item.state->seen += item.take;
    if (!item.block) continue;
    std::vector<int32_t>& draft = item.request->draft;
    const int32_t wanted = std::min(item.request->max_tokens, block_size_ - 1);
    for (int32_t b = 0; b < wanted; ++b) draft.push_back(output.tokens.at(first_logit[i] + b).token_id);
  }
}

void DFlashDrafter::propose(std::span<DraftRequest> requests) {
  struct Work {
    DraftRequest* request;
    State* state;
    int64_t context_end;  // positions [0, tokens - 1) are context; the last committed token opens the block
    bool done = false;
  };
  std::vector<Work> works;
  for (DraftRequest& request : requests) {
    request.draft.clear();
    const int64_t committed = static_cast<int64_t>(request.tokens.size());
    if (request.max_tokens <= 0 || committed == 0 || request.feature_pages.empty() ||
        committed - 1 + block_size_ > engine_->context_length()) {
      release(request.id);
      continue;
    }
    State& state = states_[request.id];
    state.seen = std::min(state.seen, committed - 1);  // committed positions never change while a request lives
    works.push_back(Work{&request, &state, committed - 1});
  }
  // Context in chunks of the step budget; a request's block goes with (or after) its last context rows.
  while (true) {
    std::vector<Item> items;
    int64_t budget = max_step_tokens_;
    for (Work& work : works) {
      if (work.done || budget <= 0) continue;
      const int64_t remaining = work.context_end - work.state->seen;
      const bool block = remaining + block_size_ <= budget;
      const int64_t take = block ? remaining : std::min(remaining, budget);
      if (!block && take == 0) continue;  // its block waits for a pass with room
      const int64_t end = work.state->seen + take + (block ? block_size_ : 0);
      // `begin` is what the drafter keeps: a window must keep the pages the next context rows read.
      if (memory_.reserve(work.state->memory, work.state->seen, end) < end) {
        RS_LOG_DEBUG("rid={} drafts nothing: the DFlash drafter's KV pool is full", work.request->id);
        release(work.request->id);
        work.done = true;
        continue;
      }
      items.push_back(Item{work.request, work.state, take, block});
      work.done = block;
      budget -= take + (block ? block_size_ : 0);
    }
    if (items.empty()) break;
    run(items);
  }
}

}  // namespace rs::spec
