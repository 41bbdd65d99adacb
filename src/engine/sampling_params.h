// SamplingParams: how one request picks its next token (plain data, validated by the server).
#pragma once

#include <cstdint>
#include <optional>
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

  // Temperatures below 1e-5 are greedy in effect (dividing logits by them would overflow float), as in vLLM.
  bool greedy() const { return temperature < 1e-5f || top_k == 1; }
};

}  // namespace rs::engine
