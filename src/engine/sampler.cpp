#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <unordered_map>
#include <vector>

namespace rs::engine {
namespace {

uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Uniform in [0, 1) from the request seed and the step index.
double uniform(uint64_t seed, uint64_t step) {
  return static_cast<double>(splitmix(splitmix(seed) ^ step) >> 11) * 0x1.0p-53;
}

int32_t argmax(std::span<const float> logits) {
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());  // first max wins
}

void log_softmax_stats(std::span<const float> logits, float* max_out, double* log_sum_out) {
  const float max_logit = *std::max_element(logits.begin(), logits.end());
  double sum = 0.0;
  for (float v : logits) sum += std::exp(static_cast<double>(v - max_logit));
  *max_out = max_logit;
  *log_sum_out = std::log(sum);
}

void apply_penalties(std::span<float> logits, const SamplingRow& row) {
  const SamplingParams& p = *row.params;
  if (p.repetition_penalty != 1.0f) {
    auto penalise = [&](int32_t id) {
      if (id < 0 || id >= static_cast<int32_t>(logits.size())) return;
      float& v = logits[id];
      v = v > 0 ? v / p.repetition_penalty : v * p.repetition_penalty;
    };
    std::vector<int32_t> seen(row.prompt_ids.begin(), row.prompt_ids.end());
    seen.insert(seen.end(), row.output_ids.begin(), row.output_ids.end());
    std::sort(seen.begin(), seen.end());
    seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
    for (int32_t id : seen) penalise(id);
  }
  if (p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f) {
    std::unordered_map<int32_t, int32_t> counts;
    for (int32_t id : row.output_ids) counts[id]++;
    for (auto [id, count] : counts) {
      if (id < 0 || id >= static_cast<int32_t>(logits.size())) continue;
      logits[id] -= p.frequency_penalty * count + p.presence_penalty;
    }
  }
}

}  // namespace

SampledToken sample_token(std::span<float> logits, const SamplingRow& row) {
  const SamplingParams& p = *row.params;
  SampledToken result;
  // Logprobs describe the model's distribution (raw logits), as OpenAI reports them.
  float max_logit = 0.0f;
  double log_sum = 0.0;
  if (p.logprobs || p.top_logprobs > 0) log_softmax_stats(logits, &max_logit, &log_sum);
  auto logprob_of = [&](int32_t id) { return static_cast<float>(logits[id] - max_logit - log_sum); };
  if (p.top_logprobs > 0) {
    const int32_t k = std::min<int32_t>(p.top_logprobs, static_cast<int32_t>(logits.size()));
    std::vector<int32_t> ids(logits.size());
    std::iota(ids.begin(), ids.end(), 0);
    std::partial_sort(ids.begin(), ids.begin() + k, ids.end(),
                      [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
    for (int32_t i = 0; i < k; ++i) result.top_logprobs.push_back({ids[i], logprob_of(ids[i])});
  }
  std::vector<float> raw_for_logprob;
  if (p.logprobs) raw_for_logprob.assign(logits.begin(), logits.end());

  apply_penalties(logits, row);
  if (p.greedy()) {
    result.token_id = argmax(logits);
  } else {
    const double inv_t = 1.0 / p.temperature;
    const float top = *std::max_element(logits.begin(), logits.end());
    const double target_fraction = uniform(row.rng_seed, row.output_ids.size());
    if (p.top_k <= 0 && p.top_p >= 1.0f && p.min_p <= 0.0f) {
      // Plain temperature sampling: inverse CDF in vocabulary order, no sort of the vocabulary.
      double total = 0.0;
      for (float v : logits) total += std::exp((v - top) * inv_t);
      const double target = target_fraction * total;
      double cumulative = 0.0;
      result.token_id = static_cast<int32_t>(logits.size()) - 1;
      for (size_t i = 0; i < logits.size(); ++i) {
        cumulative += std::exp((logits[i] - top) * inv_t);
        if (target < cumulative) {
          result.token_id = static_cast<int32_t>(i);
          break;
        }
      }
    } else {
      // Truncated sampling: only tokens within e^-30 of the best can survive top-k/top-p/min-p with any weight,
      // so sort just those (not the whole vocabulary) by logit, then truncate.
      std::vector<int32_t> ids;
      for (size_t i = 0; i < logits.size(); ++i)
        if ((logits[i] - top) * inv_t > -30.0) ids.push_back(static_cast<int32_t>(i));
      size_t keep = ids.size();
      if (p.top_k > 0) keep = std::min<size_t>(keep, p.top_k);
      std::partial_sort(ids.begin(), ids.begin() + keep, ids.end(), [&](int32_t a, int32_t b) {
        return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
      });
      ids.resize(keep);
      std::vector<double> probs(keep);
      for (size_t i = 0; i < keep; ++i) probs[i] = std::exp((logits[ids[i]] - top) * inv_t);
      if (p.min_p > 0.0f) {
        const double floor = p.min_p * probs[0];  // probs[0] is the largest
        size_t n = 1;
        while (n < keep && probs[n] >= floor) ++n;
        keep = n;
      }
      if (p.top_p < 1.0f) {
        double kept_total = 0.0;
        for (size_t i = 0; i < keep; ++i) kept_total += probs[i];
        double mass = 0.0;
        size_t n = 0;
        while (n < keep && mass < p.top_p * kept_total) mass += probs[n++];
        keep = std::max<size_t>(n, 1);
      }
      double total = 0.0;
      for (size_t i = 0; i < keep; ++i) total += probs[i];
      const double target = target_fraction * total;
      double cumulative = 0.0;
      result.token_id = ids[keep - 1];
      for (size_t i = 0; i < keep; ++i) {
        cumulative += probs[i];
        if (target < cumulative) {
          result.token_id = ids[i];
          break;
        }
      }
    }
  }
  if (p.logprobs) {
    result.logprob = static_cast<float>(raw_for_logprob[result.token_id] - max_logit - log_sum);
  }
  return result;
}

}  // namespace rs::engine
