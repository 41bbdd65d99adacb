// Synthetic benchmark workloads, deterministic by seed: random prompts (token ids or words) with lengths drawn
// uniformly from [L * (1 - R), L], optional shared prefixes, output lengths, and Poisson arrival times.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace rs::loadgen {

enum class PromptFormat : uint8_t {
  kTokenIds,  // "prompt": [ids]: exact lengths, accepted by radixserve, vLLM, SGLang and llama-server
  kText,      // "prompt": "random words": for servers that take only text; lengths are in words
};

struct WorkloadConfig {
  int32_t num_prompts = 0;
  int32_t input_len = 0;          // unique tokens (words) per prompt, after any shared prefix
  int32_t output_len = 0;         // max_tokens per request
  double range_ratio = 0;         // lengths uniform in [len * (1 - ratio), len]; 0 = all exactly len
  int32_t shared_prefix_len = 0;  // tokens (words) of each shared prefix; 0 = none
  int32_t num_prefixes = 0;       // shared prefixes; request i uses prefix i % num_prefixes
  PromptFormat format = PromptFormat::kTokenIds;
  int32_t vocab_size = 4096;  // token ids are drawn from [0, vocab_size)
  uint64_t seed = 0;
};

struct Prompt {
  std::vector<int32_t> token_ids;  // kTokenIds
  std::string text;                // kText
  int32_t input_len = 0;           // tokens or words, shared prefix included
  int32_t prefix_len = 0;          // of which the shared prefix
  int32_t prefix_index = -1;       // which shared prefix (-1: none)
  int32_t output_len = 0;
};

// A length drawn uniformly from [max(1, round(len * (1 - ratio))), len] by `uniform01` in [0, 1).
int32_t draw_length(int32_t len, double range_ratio, double uniform01);

// The workload's prompts, in submission order.
std::vector<Prompt> make_prompts(const WorkloadConfig& config);

// Send times (seconds from the start, ascending) of `count` requests arriving as a Poisson process of `rate`
// requests per second: exponential gaps, the first one included.
std::vector<double> poisson_arrivals(int32_t count, double rate, uint64_t seed);

}  // namespace rs::loadgen
