#include "sched/token_events.h"

#include <algorithm>
#include <utility>

namespace rs::sched {

TokenEvent start_event(Sequence& seq) {
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

FinishReason stop_reason(const Sequence& seq, int32_t token, int64_t context_length) {
  const auto& stops = seq.request->stop_token_ids;
  if (std::find(stops.begin(), stops.end(), token) != stops.end()) return FinishReason::kStop;
  if (seq.num_output() >= seq.request->max_new_tokens || seq.num_tokens() >= context_length)
    return FinishReason::kLength;
  return FinishReason::kNone;
}

TokenEvent final_event(const Sequence& seq, FinishReason reason, const std::string& error, ErrorCause cause) {
  TokenEvent event;
  event.finished = true;
  event.finish_reason = reason;
  event.error = error;
  event.error_cause = reason == FinishReason::kError ? cause : ErrorCause::kServer;
  event.choice_index = seq.request->choice_index;
  event.prompt_tokens = seq.num_prompt;
  event.cached_tokens = seq.cached_tokens;
  event.speculative = seq.spec.totals();
  return event;
}

}  // namespace rs::sched
