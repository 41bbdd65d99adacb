// The reference sampler (SampleSpec semantics, backend/sampling.h): every backend's sample() must pick the same token.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "backend/sampling.h"

namespace rs {
namespace {

void apply_penalties(std::span<float> logits, const SampleSpec& spec) {
  const auto vocab = static_cast<int32_t>(logits.size());
  for (const PenaltyToken& t : spec.penalty_tokens) {
    if (t.id < 0 || t.id >= vocab) continue;
    float& v = logits[t.id];
    if (spec.repetition_penalty != 1.0f) v = v > 0 ? v / spec.repetition_penalty : v * spec.repetition_penalty;
    // One rounding (fma), as the CUDA kernel computes it: builds with and without FMA contraction agree.
    if (t.output_count > 0)
      v -= std::fma(spec.frequency_penalty, static_cast<float>(t.output_count), spec.presence_penalty);
  }
}

// Inverse CDF over `weights` in order: the first index whose running sum exceeds target_fraction * total.
size_t draw(const std::vector<double>& weights, size_t count, double target_fraction) {
  double total = 0.0;
  for (size_t i = 0; i < count; ++i) total += weights[i];
  const double target = target_fraction * total;
  double cumulative = 0.0;
  for (size_t i = 0; i < count; ++i) {
    cumulative += weights[i];
    if (target < cumulative) return i;
  }
  return count - 1;
}

}  // namespace

SampledToken sample_on_host(std::span<float> logits, const SampleSpec& spec) {
  SampledToken result;
  const auto vocab = static_cast<int32_t>(logits.size());
  // Logprobs describe the model's distribution (raw logits), as OpenAI reports them.
  float max_logit = 0.0f;
  double log_sum = 0.0;
  if (spec.logprobs || spec.top_logprobs > 0) {
    max_logit = *std::max_element(logits.begin(), logits.end());
    double sum = 0.0;
    for (float v : logits) sum += std::exp(static_cast<double>(v - max_logit));
    log_sum = std::log(sum);
  }
  auto logprob_of = [&](float raw) { return static_cast<float>(raw - max_logit - log_sum); };
  const auto before = [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
  if (spec.top_logprobs > 0) {
    const int32_t k = std::min(std::min(spec.top_logprobs, kMaxTopLogprobs), vocab);
    std::vector<int32_t> ids(vocab);
    std::iota(ids.begin(), ids.end(), 0);
    std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), before);
    for (int32_t i = 0; i < k; ++i) result.top_logprobs.push_back({ids[i], logprob_of(logits[ids[i]])});
  }
  // The chosen token's raw logit, read after the draw: keep the raw values the penalties overwrite.
  std::vector<std::pair<int32_t, float>> raw_penalised;
  if (spec.logprobs)
    for (const PenaltyToken& t : spec.penalty_tokens)
      if (t.id >= 0 && t.id < vocab) raw_penalised.emplace_back(t.id, logits[t.id]);
  if (spec.has_penalties()) apply_penalties(logits, spec);

  if (spec.greedy()) {
    result.token_id = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  } else {
    const double inv_t = 1.0 / spec.temperature;
    const float top = *std::max_element(logits.begin(), logits.end());
    const double target_fraction = sample_uniform(spec.seed, spec.step);
    if (spec.top_k <= 0 && spec.top_p >= 1.0f && spec.min_p <= 0.0f) {
      // Plain temperature sampling: inverse CDF in vocabulary order, no sort of the vocabulary.
      std::vector<double> weights(vocab);
      for (int32_t i = 0; i < vocab; ++i) weights[i] = std::exp((logits[i] - top) * inv_t);
      result.token_id = static_cast<int32_t>(draw(weights, vocab, target_fraction));
    } else {
      // Truncated sampling: only tokens within kSampleCutoffNats of the best can carry weight, so sort just those
      // (not the whole vocabulary) by logit, then truncate.
      std::vector<int32_t> ids;
      for (int32_t i = 0; i < vocab; ++i)
        if ((logits[i] - top) * inv_t > -kSampleCutoffNats) ids.push_back(i);
      size_t keep = ids.size();
      if (spec.top_k > 0) keep = std::min<size_t>(keep, spec.top_k);
      std::partial_sort(ids.begin(), ids.begin() + keep, ids.end(), before);
      std::vector<double> probs(keep);
      for (size_t i = 0; i < keep; ++i) probs[i] = std::exp((logits[ids[i]] - top) * inv_t);
      if (spec.min_p > 0.0f) {
        const double floor = spec.min_p * probs[0];  // probs[0] is the largest
        size_t n = 1;
        while (n < keep && probs[n] >= floor) ++n;
        keep = n;
      }
      if (spec.top_p < 1.0f) {
        double kept_total = 0.0;
        for (size_t i = 0; i < keep; ++i) kept_total += probs[i];
        double mass = 0.0;
        size_t n = 0;
        while (n < keep && mass < spec.top_p * kept_total) mass += probs[n++];
        keep = std::max<size_t>(n, 1);
      }
      result.token_id = ids[draw(probs, keep, target_fraction)];
    }
  }
  if (spec.logprobs) {
    float raw = logits[result.token_id];
    for (auto [id, value] : raw_penalised)
      if (id == result.token_id) raw = value;
    result.logprob = logprob_of(raw);
  }
  return result;
}

SampledToken score_on_host(std::span<const float> logits, int32_t token, int32_t top) {
  const auto vocab = static_cast<int32_t>(logits.size());
  const float max_logit = *std::max_element(logits.begin(), logits.end());
  double sum = 0.0;
  for (float v : logits) sum += std::exp(static_cast<double>(v - max_logit));
  const double log_sum = std::log(sum);
  auto logprob_of = [&](float raw) { return static_cast<float>(raw - max_logit - log_sum); };
  const auto before = [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
  SampledToken result;
  result.token_id = token;
  result.logprob = logprob_of(logits[token]);
  result.rank = 1;
  for (int32_t i = 0; i < vocab; ++i) result.rank += before(i, token) ? 1 : 0;
  const int32_t k = std::min(std::min(top, kMaxTopLogprobs), vocab);
  if (k > 0) {
    std::vector<int32_t> ids(vocab);
    std::iota(ids.begin(), ids.end(), 0);
    std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), before);
    for (int32_t i = 0; i < k; ++i) result.top_logprobs.push_back({ids[i], logprob_of(logits[ids[i]])});
  }
  return result;
}

}  // namespace rs
