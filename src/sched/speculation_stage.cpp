#include "sched/speculation_stage.h"

#include <algorithm>

#include "base/error.h"
#include "base/log.h"

namespace rs::sched {

SpeculationStage::SpeculationStage(const spec::SpeculativeConfig& policy, std::unique_ptr<spec::Drafter> drafter,
                                   int32_t feature_group, int64_t context_length)
    : policy_(policy), drafter_(std::move(drafter)), feature_group_(feature_group), context_length_(context_length) {
  RS_CHECK(!drafter_ || (policy_.num_draft_tokens > 0 && policy_.max_batch > 0),
           "speculative decoding needs positive draft tokens and batch limit");
}

bool SpeculationStage::propose(std::vector<StepItem>& items, memory::MemoryManager& memory) {
  if (!drafter_) return false;
  const spec::SpeculativeConfig& policy = policy_;
  std::vector<StepItem*> decodes;
  for (StepItem& item : items)
    if (item.end - item.begin == 1 && item.samples()) decodes.push_back(&item);
  if (decodes.empty() || static_cast<int32_t>(decodes.size()) > policy.max_batch) return false;
  std::vector<spec::DraftRequest> requests;
  std::vector<StepItem*> drafting;
  for (StepItem* item : decodes) {
    Sequence& seq = *item->seq;
    // Constrained output would need the grammar advanced along the draft; such sequences decode one token a step.
    if (seq.request->grammar || !seq.spec.should_draft(seq.num_output())) continue;
    // The step emits up to draft + 1 tokens, within max_new_tokens and the context.
    const int64_t room =
        std::min<int64_t>(seq.request->max_new_tokens - seq.num_output(), context_length_ - seq.num_tokens()) - 1;
    const int32_t max_tokens = static_cast<int32_t>(std::min<int64_t>(policy.num_draft_tokens, room));
    if (max_tokens <= 0) continue;
    spec::DraftRequest request{.id = seq.request->id, .tokens = seq.tokens, .max_tokens = max_tokens};
    if (feature_group_ >= 0) request.feature_pages = seq.memory.kv.pages[feature_group_];
    requests.push_back(request);
    drafting.push_back(item);
  }
  if (requests.empty()) return false;
  try {
    drafter_->propose(requests);
  } catch (const std::exception& e) {
    RS_LOG_WARN("drafting failed; this step decodes without drafts: {}", e.what());
    return true;
  }
  for (size_t i = 0; i < requests.size(); ++i) {
    StepItem& item = *drafting[i];
    Sequence& seq = *item.seq;
    const auto& draft = requests[i].draft;
    const int64_t wanted = std::min<int64_t>(static_cast<int64_t>(draft.size()), requests[i].max_tokens);
    if (wanted <= 0) continue;
    // Pages for the draft positions only if free (or evictable) now: a draft never preempts anything. Recurrent
    // state (hybrid models) needs a free slot per draft token to roll back to; snapshots are not evicted for them.
    const int64_t slots = seq.memory.state_slot >= 0 ? memory.free_state_slots() : wanted;
    const int64_t reserved = memory.reserve(seq.memory, seq.kv_len, item.end + std::min(wanted, slots));
    const int64_t length = std::min({wanted, slots, reserved - item.end});
    if (length <= 0) continue;
    seq.tokens.insert(seq.tokens.end(), draft.begin(), draft.begin() + length);
    seq.num_draft = static_cast<int32_t>(length);
    if (seq.memory.state_slot >= 0)
      for (int64_t i = 0; i < length; ++i) memory.take_checkpoint(seq.memory);
    item.end = seq.num_tokens();
  }
  return true;
}

int32_t SpeculationStage::settle(Sequence& seq, const engine::StepOutput& output, size_t row,
                                 memory::MemoryManager& memory) {
  const int32_t drafted = seq.num_draft;
  const std::vector<int32_t> draft(seq.tokens.end() - drafted, seq.tokens.end());
  std::vector<int32_t> sampled;
  for (int32_t j = 0; j <= drafted; ++j) sampled.push_back(output.tokens[row + j].token_id);
  const int32_t accepted = spec::accepted_length(draft, sampled);
  // Recurrent state went through every draft token: take it back to the last accepted one (the copy runs before the
  // next step, ahead of any later use of the checkpoint slots freed here).
  if (accepted < drafted && !seq.memory.checkpoints.empty()) memory.rollback(seq.memory, accepted);
  drop_draft(seq, memory);
  seq.spec.record(drafted, accepted, seq.num_output(), policy_);
  return accepted;
}

void SpeculationStage::drop_draft(Sequence& seq, memory::MemoryManager& memory) {
  seq.tokens.resize(seq.tokens.size() - seq.num_draft);
  seq.num_draft = 0;
  memory.drop_checkpoints(seq.memory);
}

}  // namespace rs::sched
