#include "engine/sampler.h"

#include <algorithm>
#include <limits>

namespace rs::engine {

SampleSpec make_sample_spec(const SamplingRow& row, std::vector<PenaltyToken>& penalty_storage) {
  const SamplingParams& p = *row.params;
  SampleSpec spec{.temperature = p.temperature,
                  .top_k = p.top_k,
                  .top_p = p.top_p,
                  .min_p = p.min_p,
                  .repetition_penalty = p.repetition_penalty,
                  .presence_penalty = p.presence_penalty,
                  .frequency_penalty = p.frequency_penalty,
                  .seed = row.rng_seed,
                  .step = row.output_ids.size(),
                  .top_logprobs = p.top_logprobs,
                  .logprobs = p.logprobs};
  if (!spec.has_penalties()) return spec;
  // Unique ids: every prompt and output id when the repetition penalty is on, else the output ids; with the number
  // of times each was generated.
  std::vector<int32_t> outputs(row.output_ids.begin(), row.output_ids.end());
  std::sort(outputs.begin(), outputs.end());
  std::vector<int32_t> seen = outputs;
  if (p.repetition_penalty != 1.0f) seen.insert(seen.end(), row.prompt_ids.begin(), row.prompt_ids.end());
  std::sort(seen.begin(), seen.end());
  seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
  const size_t first = penalty_storage.size();
  for (int32_t id : seen) {
    const auto range = std::equal_range(outputs.begin(), outputs.end(), id);
    penalty_storage.push_back({id, static_cast<int32_t>(range.second - range.first)});
  }
  spec.penalty_tokens = std::span<const PenaltyToken>(penalty_storage.data() + first, penalty_storage.size() - first);
  return spec;
}

bool logit_adjustment(const SamplingRow& row, int64_t vocab, std::vector<float>& dense) {
  const SamplingParams& p = *row.params;
  const bool ban_stops = static_cast<int64_t>(row.output_ids.size()) < p.min_tokens && !row.stop_ids.empty();
  if (p.logit_bias.empty() && !ban_stops) return false;
  dense.assign(static_cast<size_t>(vocab), 0.0f);
  for (const auto& [id, bias] : p.logit_bias)
    if (id >= 0 && id < vocab) dense[id] += bias;
  if (ban_stops)
    for (int32_t id : row.stop_ids)
      if (id >= 0 && id < vocab) dense[id] = -std::numeric_limits<float>::infinity();
  return true;
}

SampledToken sample_token(std::span<float> logits, const SamplingRow& row) {
  std::vector<float> adjustment;
  if (logit_adjustment(row, static_cast<int64_t>(logits.size()), adjustment))
    for (size_t i = 0; i < logits.size(); ++i) logits[i] += adjustment[i];
  for (size_t i = 0; i < logits.size() && i / 32 < row.token_bitmask.size(); ++i)
    if (!((row.token_bitmask[i / 32] >> (i % 32)) & 1u)) logits[i] = -std::numeric_limits<float>::infinity();
  std::vector<PenaltyToken> penalties;
  return sample_on_host(logits, make_sample_spec(row, penalties));
}

}  // namespace rs::engine
