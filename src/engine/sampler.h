// Sampler: turns a request's SamplingParams and history into the backend's SampleSpec (backend/sampling.h), and
// samples one host row with the reference implementation (tests, tools).
#pragma once

#include <span>
#include <vector>

#include "engine/forward_batch.h"

namespace rs::engine {

// The spec of one logit row. Penalised token ids (unique, with their output counts) go into `penalty_storage`, which
// the spec points into: it must outlive the spec and not grow while it is used.
SampleSpec make_sample_spec(const SamplingRow& row, std::vector<PenaltyToken>& penalty_storage);

// Whether `row` changes its logits before sampling (logit_bias, or stop tokens banned below min_tokens); if so, `dense`
// becomes the [vocab] row to add: the biases, and -inf on banned ids (ids outside the vocabulary are ignored).
bool logit_adjustment(const SamplingRow& row, int64_t vocab, std::vector<float>& dense);

// Picks the next token for `row` from `logits` (f32 [vocab], modified in place as scratch), after its logit_bias,
// min_tokens ban and token bitmask.
// Deterministic: the random draw depends only on (row.rng_seed, row.output_ids.size()).
SampledToken sample_token(std::span<float> logits, const SamplingRow& row);

}  // namespace rs::engine
