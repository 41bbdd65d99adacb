// Sampler: turns one row of logits into a token (greedy, temperature, top-k/top-p/min-p, penalties, seeded RNG).
#pragma once

#include <span>

#include "engine/forward_batch.h"

namespace rs::engine {

// Picks the next token for `row` from `logits` (f32 [vocab], modified in place as scratch).
// Deterministic: the random draw depends only on (row.rng_seed, row.output_ids.size()).
SampledToken sample_token(std::span<float> logits, const SamplingRow& row);

}  // namespace rs::engine
