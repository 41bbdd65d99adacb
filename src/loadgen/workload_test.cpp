#include "loadgen/workload.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

namespace rs::loadgen {
namespace {

TEST(Workload, LengthsAreUniformInTheRange) {
  EXPECT_EQ(draw_length(100, 0.0, 0.7), 100);
  EXPECT_EQ(draw_length(100, 0.5, 0.0), 50);
  EXPECT_EQ(draw_length(100, 0.5, 0.999999), 100);
  EXPECT_EQ(draw_length(1, 1.0, 0.0), 1);
  EXPECT_EQ(draw_length(10, 1.0, 0.0), 1);

  const auto prompts = make_prompts({.num_prompts = 2000, .input_len = 100, .output_len = 40, .range_ratio = 0.5});
  int32_t shortest = 1 << 30, longest = 0;
  double sum = 0;
  for (const Prompt& p : prompts) {
    shortest = std::min(shortest, p.input_len);
    longest = std::max(longest, p.input_len);
    sum += p.input_len;
    EXPECT_EQ(static_cast<int32_t>(p.token_ids.size()), p.input_len);
    EXPECT_GE(p.output_len, 20);
    EXPECT_LE(p.output_len, 40);
  }
  EXPECT_EQ(shortest, 50);
  EXPECT_EQ(longest, 100);
  EXPECT_NEAR(sum / prompts.size(), 75.0, 1.5);
}

TEST(Workload, SameSeedSamePromptsOtherSeedOthers) {
  const WorkloadConfig config{.num_prompts = 4, .input_len = 16, .output_len = 4, .vocab_size = 1000, .seed = 9};
  const auto a = make_prompts(config), b = make_prompts(config);
  WorkloadConfig other = config;
  other.seed = 10;
  const auto c = make_prompts(other);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].token_ids, b[i].token_ids);
    EXPECT_NE(a[i].token_ids, c[i].token_ids);
    for (int32_t id : a[i].token_ids) EXPECT_TRUE(id >= 0 && id < 1000);
  }
}

TEST(Workload, SharedPrefixesRoundRobinThenUniqueSuffixes) {
  const auto prompts = make_prompts(
      {.num_prompts = 6, .input_len = 5, .output_len = 3, .shared_prefix_len = 32, .num_prefixes = 2, .seed = 1});
  for (size_t i = 0; i < prompts.size(); ++i) {
    const Prompt& p = prompts[i];
    EXPECT_EQ(p.prefix_index, static_cast<int32_t>(i % 2));
    EXPECT_EQ(p.input_len, 37);
    ASSERT_EQ(p.token_ids.size(), 37u);
    const Prompt& first = prompts[i % 2];
    EXPECT_TRUE(std::equal(p.token_ids.begin(), p.token_ids.begin() + 32, first.token_ids.begin()));
    if (i >= 2) {
      EXPECT_FALSE(std::equal(p.token_ids.begin() + 32, p.token_ids.end(), first.token_ids.begin() + 32));
    }
  }
  EXPECT_FALSE(
      std::equal(prompts[0].token_ids.begin(), prompts[0].token_ids.begin() + 32, prompts[1].token_ids.begin()));
}

TEST(Workload, TextPromptsCountWords) {
  const auto prompts = make_prompts({.num_prompts = 3,
                                     .input_len = 7,
                                     .output_len = 2,
                                     .shared_prefix_len = 4,
                                     .num_prefixes = 1,
                                     .format = PromptFormat::kText});
  for (const Prompt& p : prompts) {
    EXPECT_TRUE(p.token_ids.empty());
    EXPECT_EQ(std::count(p.text.begin(), p.text.end(), ' ') + 1, 11);
    EXPECT_EQ(p.input_len, 11);
  }
}

TEST(Workload, PoissonArrivalsHaveTheAskedRate) {
  const auto times = poisson_arrivals(20000, 50.0, 3);
  EXPECT_TRUE(std::is_sorted(times.begin(), times.end()));
  EXPECT_GT(times.front(), 0.0);
  EXPECT_NEAR(times.size() / times.back(), 50.0, 1.5);
  EXPECT_EQ(poisson_arrivals(5, 2.0, 3), poisson_arrivals(5, 2.0, 3));
}

}  // namespace
}  // namespace rs::loadgen
