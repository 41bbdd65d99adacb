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

TEST(Sampler, LogitBiasAndMinTokensBanStopTokens) {
  SamplingParams p{.temperature = 0.0f};
  p.logit_bias = {{2, 10.0f}, {99, 5.0f}};  // 99: outside the vocabulary, ignored
  EXPECT_EQ(run({1, 5, 0, 2}, p).token_id, 2);
  std::vector<float> dense;
  const std::vector<int32_t> stops = {1, 3};
  SamplingParams q{.temperature = 0.0f};
  q.min_tokens = 2;
  const std::vector<int32_t> one = {7};
  SamplingRow row{&q, {}, one, 1, stops};
  ASSERT_TRUE(logit_adjustment(row, 4, dense));  // 1 token so far < 2: stops banned
  EXPECT_EQ(dense[0], 0.0f);
  EXPECT_TRUE(std::isinf(dense[1]) && dense[1] < 0);
  EXPECT_TRUE(std::isinf(dense[3]) && dense[3] < 0);
  std::vector<float> logits = {1, 5, 0, 9};
  EXPECT_EQ(sample_token(logits, row).token_id, 0);  // 1 and 3 are banned
  const std::vector<int32_t> two = {7, 7};
  EXPECT_FALSE(logit_adjustment(SamplingRow{&q, {}, two, 1, stops}, 4, dense));  // min_tokens reached
  EXPECT_FALSE(logit_adjustment(SamplingRow{&q, {}, one, 1, {}}, 4, dense));     // no stop tokens to ban
}

TEST(Sampler, TokenBitmaskLeavesOnlyAllowedTokens) {
  std::vector<float> logits(40, 0.0f);
  logits[3] = 9.0f;                                               // the favourite, masked out
  logits[35] = 4.0f;                                              // the best allowed token
  const std::vector<uint32_t> mask = {0x00000006u, 0x0000000Cu};  // ids 1, 2, 34, 35
  SamplingParams greedy{.temperature = 0.0f}, hot{.temperature = 5.0f};
  SamplingRow row{&greedy};
  row.token_bitmask = mask;
  std::vector<float> scratch = logits;
  EXPECT_EQ(sample_token(scratch, row).token_id, 35);
  row.params = &hot;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    row.rng_seed = seed;
    scratch = logits;
    const int32_t id = sample_token(scratch, row).token_id;
    EXPECT_TRUE(id == 1 || id == 2 || id == 34 || id == 35) << id;
  }
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
