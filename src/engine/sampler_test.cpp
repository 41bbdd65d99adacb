#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

namespace rs::engine {
namespace {

SampledToken run(std::vector<float> logits, const SamplingParams& params, uint64_t seed = 1,
                 std::vector<int32_t> output = {}, std::vector<int32_t> prompt = {}) {
  SamplingRow row{&params, prompt, output, seed};
  return sample_token(logits, row);
}

TEST(Sampler, GreedyTakesFirstMaximum) {
  SamplingParams greedy{.temperature = 0.0f};
  EXPECT_EQ(run({1, 5, 5, 2}, greedy).token_id, 1);
}

TEST(Sampler, SameSeedSameTokensDifferentSeedsDiffer) {
  SamplingParams p{.temperature = 1.0f};
  std::vector<float> flat(50, 0.0f);
  std::map<int32_t, int> seen;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    EXPECT_EQ(run(flat, p, seed).token_id, run(flat, p, seed).token_id);
    seen[run(flat, p, seed).token_id]++;
  }
  EXPECT_GT(seen.size(), 5u);
}

TEST(Sampler, TopKTopPMinPTruncate) {
  std::vector<float> logits = {3.0f, 2.9f, 0.0f, -5.0f};
  for (uint64_t seed = 0; seed < 50; ++seed) {
    EXPECT_LT(run(logits, {.temperature = 1.0f, .top_k = 2}, seed).token_id, 2);
    EXPECT_LT(run(logits, {.temperature = 1.0f, .top_p = 0.5f}, seed).token_id, 2);
    EXPECT_LT(run(logits, {.temperature = 1.0f, .min_p = 0.2f}, seed).token_id, 2);
  }
}

TEST(Sampler, TinyTemperaturesAreGreedyNotNaN) {
  std::vector<float> logits = {1.0f, 30.0f, -2.0f, 29.0f};
  for (float t : {1e-40f, 1e-30f, 1e-6f}) EXPECT_EQ(run(logits, {.temperature = t}).token_id, 1) << t;
  // Small but meaningful temperatures sample without overflow and still prefer the best token.
  for (uint64_t seed = 0; seed < 20; ++seed) EXPECT_EQ(run(logits, {.temperature = 1e-3f}, seed).token_id, 1);
}

TEST(Sampler, PlainTemperatureFollowsTheSoftmax) {
  // p = softmax([0, ln 3]) = [0.25, 0.75]; 4000 seeded draws land within a few percent.
  std::vector<float> logits = {0.0f, std::log(3.0f)};
  int ones = 0;
  for (uint64_t seed = 0; seed < 4000; ++seed) ones += run(logits, {.temperature = 1.0f}, seed).token_id;
  EXPECT_NEAR(ones / 4000.0, 0.75, 0.03);
}

TEST(Sampler, PenaltiesFollowHfAndOpenAi) {
  // Repetition penalty divides a positive logit of a seen token (HF): 4/4 = 1 < 2.
  EXPECT_EQ(run({4.0f, 2.0f}, {.temperature = 0.0f, .repetition_penalty = 4.0f}, 1, {}, {0}).token_id, 1);
  // Frequency penalty subtracts count * penalty over generated tokens: 4 - 2*1.5 = 1 < 2.
  EXPECT_EQ(run({4.0f, 2.0f}, {.temperature = 0.0f, .frequency_penalty = 1.5f}, 1, {0, 0}).token_id, 1);
  EXPECT_EQ(run({4.0f, 2.0f}, {.temperature = 0.0f, .presence_penalty = 2.5f}, 1, {0}).token_id, 1);
}

TEST(Sampler, ReportsLogprobsOfRawLogits) {
  SamplingParams p{.temperature = 0.0f, .top_logprobs = 2, .logprobs = true};
  auto token = run({0.0f, std::log(3.0f)}, p);
  EXPECT_EQ(token.token_id, 1);
  EXPECT_NEAR(token.logprob, std::log(0.75f), 1e-6);
  ASSERT_EQ(token.top_logprobs.size(), 2u);
  EXPECT_NEAR(token.top_logprobs[1].logprob, std::log(0.25f), 1e-6);
}

}  // namespace
}  // namespace rs::engine
