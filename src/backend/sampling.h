// Sampling on the backend: what one logit row needs to pick its token, and what comes back. The engine turns a
// request's SamplingParams into a SampleSpec; every backend implements the same semantics (cpu/kernels/sample.cpp is
// the reference): penalties, then greedy or a seeded draw from the temperature softmax truncated by top-k, min-p and
// top-p in descending (logit, then lower id) order; logprobs describe the raw logits.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace rs {

// A token seen by the request: repetition_penalty applies to every listed id, presence/frequency to those with
// output_count > 0 (count * frequency_penalty + presence_penalty is subtracted). Ids are unique.
struct PenaltyToken {
  int32_t id = 0;
  int32_t output_count = 0;
};

struct SampleSpec {
  float temperature = 0.0f;  // greedy() decides; otherwise > 0
  int32_t top_k = -1;        // <= 0: off
  float top_p = 1.0f;        // (0, 1]; 1: off
  float min_p = 0.0f;        // [0, 1]; 0: off
  float repetition_penalty = 1.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  std::span<const PenaltyToken> penalty_tokens;  // empty when no penalty is active
  uint64_t seed = 0;                             // the draw is uniform(seed, step): same seed and step, same token
  uint64_t step = 0;                             // tokens generated so far
  int32_t top_logprobs = 0;                      // alternatives to report, at most kMaxTopLogprobs
  bool logprobs = false;                         // report the chosen token's logprob

  // Temperatures below 1e-5 are greedy in effect (dividing logits by them would overflow float), as in vLLM.
  bool greedy() const { return temperature < 1e-5f || top_k == 1; }
  bool has_penalties() const {
    return repetition_penalty != 1.0f || presence_penalty != 0.0f || frequency_penalty != 0.0f;
  }
};

constexpr int32_t kMaxTopLogprobs = 20;

struct TokenLogprob {
  int32_t token_id = 0;
  float logprob = 0.0f;
};

// Result for one logit row.
struct SampledToken {
  int32_t token_id = 0;
  float logprob = 0.0f;                    // log-softmax of the raw logits (before temperature/penalties)
  std::vector<TokenLogprob> top_logprobs;  // highest first (ties: lower id first), when requested
  int32_t rank = 0;                        // scored rows (score_on_host): 1 + tokens ranked before token_id
};

// The uniform draw in [0, 1) of (seed, step): splitmix64 twice, 53 bits. Host and device compute it alike.
inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
inline double sample_uniform(uint64_t seed, uint64_t step) {
  return static_cast<double>(splitmix64(splitmix64(seed) ^ step) >> 11) * 0x1.0p-53;
}

// The reference implementation (backend/cpu/kernels/sample.cpp), on host memory: `logits` [vocab] is overwritten as
// scratch. Every backend's sample() picks what this picks.
SampledToken sample_on_host(std::span<float> logits, const SampleSpec& spec);

// A prompt token's score, nothing sampled: the log-softmax of the raw `logits` [vocab] at `token`, its rank (1 = the
// most likely; ties: lower id first) and the `top` most likely alternatives as sample_on_host reports them.
SampledToken score_on_host(std::span<const float> logits, int32_t token, int32_t top);

// Only tokens whose scaled logit is within this many nats of the best can carry weight in a truncated draw.
constexpr double kSampleCutoffNats = 30.0;

}  // namespace rs
