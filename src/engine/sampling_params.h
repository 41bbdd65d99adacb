// SamplingParams: how one request picks its next token (plain data, validated by the server).
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace rs::engine {

struct SamplingParams {
  float temperature = 1.0f;         // 0 = greedy
  int32_t top_k = -1;               // <= 0: disabled
  float top_p = 1.0f;               // (0, 1]
  float min_p = 0.0f;               // [0, 1]
  float repetition_penalty = 1.0f;  // > 0; 1 = off (HF semantics: divides positive logits of seen tokens)
  float presence_penalty = 0.0f;    // OpenAI semantics over generated tokens
  float frequency_penalty = 0.0f;
  std::optional<uint64_t> seed;  // same seed, same tokens
  int32_t top_logprobs = 0;      // number of alternatives to report (0 = none)
  bool logprobs = false;         // report the chosen token's logprob
  // vLLM's prompt_logprobs (also OpenAI's echo + logprobs): -1 = off, else each prompt token's logprob and this many
  // alternatives, computed in the prefill (the prompt is then never reused from the prefix cache).
  int32_t prompt_logprobs = -1;
  // Added to the logits of these token ids before sampling (OpenAI's logit_bias; ids below the vocabulary size).
  std::vector<std::pair<int32_t, float>> logit_bias;
  // The request's stop tokens cannot be sampled before this many tokens have been generated (vLLM's min_tokens).
  int32_t min_tokens = 0;

  // Temperatures below 1e-5 are greedy in effect (dividing logits by them would overflow float), as in vLLM.
  bool greedy() const { return temperature < 1e-5f || top_k == 1; }
};

}  // namespace rs::engine
