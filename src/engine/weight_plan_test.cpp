#include "engine/weight_plan.h"

#include <gtest/gtest.h>

#include <cstdio>

namespace rs::engine {
namespace {

loader::ModelConfig config(const std::string& name) {
  return loader::load_model_config(std::filesystem::path(RS_SOURCE_DIR) / "configs" / name);
}

// Parameter counts as the releases state them (model cards), from config.json alone.
TEST(WeightPlan, ParameterCountsOfTheReleases) {
  const struct {
    const char* name;
    double billions;
    double tolerance;
  } models[] = {
      {"Qwen3-0.6B", 0.596, 0.01},        {"Qwen3-8B", 8.19, 0.005},    {"Llama-3.1-8B-Instruct", 8.03, 0.005},
      {"Qwen3-30B-A3B", 30.53, 0.01},     {"gpt-oss-20b", 20.91, 0.02}, {"gpt-oss-120b", 116.83, 0.02},
      {"Qwen3-Next-80B-A3B", 80.0, 0.01},
  };
  for (const auto& m : models) {
    const double got = count_parameters(config(m.name)).total() / 1e9;
    std::printf("%s: %.3fB parameters (release: %.2fB)\n", m.name, got, m.billions);
    EXPECT_NEAR(got, m.billions, m.billions * m.tolerance) << m.name;
  }
}

TEST(WeightPlan, DummyBytesAtTheStoredWidth) {
  const loader::ModelConfig bf16 = config("Qwen3-8B");
  const double params = count_parameters(bf16).total();
  EXPECT_NEAR(static_cast<double>(planned_weight_bytes("", bf16, true)), 2 * params, 1e6);
  // gpt-oss: MXFP4 experts (4.25 bits), the rest bf16: ~12.8 GiB for 20.9B parameters.
  const double gib = static_cast<double>(planned_weight_bytes("", config("gpt-oss-20b"), true)) / (1 << 30);
  EXPECT_GT(gib, 11.0);
  EXPECT_LT(gib, 14.0);
}

TEST(WeightPlan, CheckpointBytesAreItsTensorFiles) {
  const auto dir = std::filesystem::path(RS_SOURCE_DIR) / "tests/data/models/qwen3";
  const double planned = static_cast<double>(planned_weight_bytes(dir, loader::load_model_config(dir), false));
  const double file = static_cast<double>(std::filesystem::file_size(dir / "model.safetensors"));
  EXPECT_LE(planned, file);  // a lower bound: the smaller of the files and the parameters at their width
  EXPECT_GT(planned, 0.95 * file);
}

}  // namespace
}  // namespace rs::engine
