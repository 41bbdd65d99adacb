#include "sched/grammar_stage.h"

#include <algorithm>

#include "base/log.h"
#include "grammar/matcher.h"

namespace rs::sched {

void size_token_bitmasks(const std::vector<StepItem>& items, int32_t vocab_size) {
  for (const StepItem& item : items)
    if (item.seq->grammar_active && item.samples()) item.seq->token_bitmask.resize(grammar::bitmask_words(vocab_size));
}

MaskFailures fill_token_bitmasks(const std::vector<StepItem>& items, int32_t vocab_size) {
  MaskFailures failures;
  for (const StepItem& item : items) {
    Sequence& seq = *item.seq;
    if (!seq.grammar_active || !item.samples()) continue;
    try {
      seq.request->grammar->fill_next_token_bitmask(seq.token_bitmask, seq.request->stop_token_ids);
      const int32_t alternative = seq.request->grammar_or_token;
      if (seq.num_output() == 0 && alternative >= 0 && alternative < vocab_size)
        seq.token_bitmask[alternative / 32] |= 1u << (alternative % 32);
    } catch (const std::exception& e) {
      RS_LOG_ERROR("rid={} token mask failed: {}", seq.request->id, e.what());
      std::fill(seq.token_bitmask.begin(), seq.token_bitmask.end(), ~0u);  // sampled, then discarded
      failures.emplace_back(&seq, e.what());
    }
  }
  return failures;
}

FinishReason advance_grammar(Sequence& seq, int32_t token, std::string& error, bool& request_error) {
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

}  // namespace rs::sched
