#include "model/rope_table.h"

#include <gtest/gtest.h>

namespace rs::model {
namespace {

TEST(RopeTable, YarnMatchesGptOssConstants) {
  loader::RopeConfig rope;
  rope.type = "yarn";
  rope.theta = 150000;
  rope.factor = 32;
  rope.original_max_position = 4096;
  rope.truncate = false;
  EXPECT_NEAR(rope_attention_scaling(rope), 1.3465736f, 1e-6);
  auto inv = rope_inv_freq(rope, 64);
  // Dims below low = 8.09 keep the original frequency; dims above high = 17.4 are divided by the factor.
  EXPECT_FLOAT_EQ(inv[0], 1.0f);
  EXPECT_NEAR(inv[31], 1.0f / std::pow(150000.0f, 62.0f / 64) / 32, 1e-12);
}

TEST(RopeTable, Llama3KeepsHighFrequencies) {
  loader::RopeConfig rope;
  rope.type = "llama3";
  rope.theta = 500000;
  rope.factor = 8;
  rope.original_max_position = 8192;
  auto inv = rope_inv_freq(rope, 128);
  EXPECT_FLOAT_EQ(inv[0], 1.0f);
  EXPECT_NEAR(inv[63], 1.0f / std::pow(500000.0f, 126.0f / 128) / 8, 1e-12);
}

}  // namespace
}  // namespace rs::model
