// Structured output inside a step: each constrained sequence's token bitmask, sized before the step's batch is built
// (its sampling rows point at it), filled between launch and sample while the device runs the forward, and the
// sequence's grammar advanced by every token it keeps.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "sched/batch_builder.h"
#include "sched/request.h"
#include "sched/sequence.h"

namespace rs::sched {

// A sequence whose mask could not be computed, with the reason: it samples with an all-ones mask and is finished
// once the step is sampled.
using MaskFailures = std::vector<std::pair<Sequence*, std::string>>;

// Sizes the bitmask of every constrained sequence that samples this step (ceil(vocab / 32) words).
void size_token_bitmasks(const std::vector<StepItem>& items, int32_t vocab_size);
// Fills those masks from each sequence's grammar (plus the alternative first token that may open reasoning instead).
MaskFailures fill_token_bitmasks(const std::vector<StepItem>& items, int32_t vocab_size);
// Advances the sequence's grammar by its new token; the reason to finish now, or kNone. On failure sets `error`, and
// `request_error` when the grammar itself is at fault (too complex), not the engine (a token it should not have
// sampled).
FinishReason advance_grammar(Sequence& seq, int32_t token, std::string& error, bool& request_error);

}  // namespace rs::sched
