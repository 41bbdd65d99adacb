// Tensor parallelism on CPU ranks (model/tensor_parallel.h, issue 41): every fixture the split supports, in exact f32,
// gives at --tensor-parallel-size 2 and 4 the greedy tokens of the unsplit model, run as `serve` runs them (the
// scheduler, batched with 7-token prefill chunks), and its logits stay within summation-order noise of them and of
// transformers' (golden.json).
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "loader/model_folder.h"
#include "serving/driver.h"

namespace rs {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

// f32 everywhere: the ranks' partial sums only reorder additions (seen: <= 1e-5 against the unsplit model).
constexpr float kLogitTolerance = 5e-4f;

// A fixture's model folder: a GGUF fixture's file turned into one (as --model FILE.gguf does).
fs::path fixture(const std::string& name) {
  const fs::path dir = fs::path(RS_SOURCE_DIR) / "tests/data/models" / name;
  if (fs::exists(dir / (name + ".gguf"))) return loader::resolve_model_folder(dir / (name + ".gguf"));
  return dir;
}

struct Outcome {
  std::vector<std::vector<int32_t>> tokens;      // per case
  std::vector<std::vector<float>> first_logits;  // per case: the last prompt position's
};

// The fixture's cases: its golden.json's (transformers' last-position logits beside them), or, for the quantized
// fixtures (whose reference is their dequantized twin), two prompts of 16 tokens each.
json cases_of(const std::string& name) {
  std::ifstream in(fixture(name) / "golden.json");
  if (in) return json::parse(in);
  json ref;
  for (int first : {1, 40}) {
    json c;
    std::vector<int32_t> prompt;
    for (int i = 0; i < (first == 1 ? 7 : 30); ++i) prompt.push_back((first + 13 * i) % 250 + 1);
    c["prompt_ids"] = prompt;
    c["greedy_ids"] = std::vector<int32_t>(16, 0);  // only the count is read
    ref["cases"].push_back(c);
  }
  return ref;
}

// Every case twice at once, prompts prefilled 7 tokens at a time, then once more.
Outcome run_cases(const std::string& name, int32_t tp, bool expert_parallel = false) {
  const json ref = cases_of(name);
  engine::EngineConfig config;
  config.num_threads = 2;
  config.exact_f32 = true;
  config.kv_cache_gb = 0.04;
  config.context_length = 1024;
  config.tensor_parallel_size = tp;
  config.expert_parallel = expert_parallel;
  config.num_state_slots = static_cast<int32_t>(8 * ref["cases"].size());  // hybrid models: every prompt's snapshot
  sched::SchedulerConfig scheduler;
  scheduler.max_running_requests = static_cast<int32_t>(2 * ref["cases"].size());
  scheduler.chunked_prefill_size = 7;
  scheduler.max_prefill_tokens = 512;
  serving::Driver driver(fixture(name).string(), config, scheduler, serving::DriverOptions{.keep_logits = true});
  std::vector<size_t> ids;
  for (int copy = 0; copy < 2; ++copy)
    for (const auto& c : ref["cases"])
      ids.push_back(driver.submit(c["prompt_ids"].get<std::vector<int32_t>>(),
                                  engine::SamplingParams{.temperature = 0.0f},
                                  static_cast<int32_t>(c["greedy_ids"].size())));
  driver.run();
  // Then every case again: its prompt from the prefix cache (hybrid models: a state snapshot copied back, on every
  // rank's pool).
  std::vector<size_t> again;
  for (const auto& c : ref["cases"])
    again.push_back(driver.submit(c["prompt_ids"].get<std::vector<int32_t>>(),
                                  engine::SamplingParams{.temperature = 0.0f},
                                  static_cast<int32_t>(c["greedy_ids"].size())));
  driver.run();
  int64_t cached = 0;
  for (size_t id : again) cached += driver.result(id).cached_tokens;
  EXPECT_GT(cached, 0) << name << " tp " << tp << ": the second round reuses the first's prompts";
  ids.insert(ids.end(), again.begin(), again.end());
  Outcome run;
  for (size_t id : ids) {
    const serving::Completion& got = driver.result(id);
    run.tokens.push_back(got.tokens);
    run.first_logits.push_back(got.logits.empty() ? std::vector<float>{} : got.logits[0]);
  }
  // The transformers reference of the first copy of each case.
  for (size_t i = 0; i < ref["cases"].size() && ref["cases"][i].contains("last_logits"); ++i) {
    const auto expected = ref["cases"][i]["last_logits"].get<std::vector<float>>();
    EXPECT_EQ(run.first_logits[i].size(), expected.size());
    float diff = 0;
    for (size_t v = 0; v < std::min(expected.size(), run.first_logits[i].size()); ++v)
      diff = std::max(diff, std::abs(run.first_logits[i][v] - expected[v]));
    EXPECT_LE(diff, kLogitTolerance) << name << " tp " << tp << " case " << i << " against transformers";
  }
  return run;
}

class TensorParallelTest : public ::testing::TestWithParam<const char*> {};

TEST_P(TensorParallelTest, GreedyTokensOfTheUnsplitModel) {
  const Outcome whole = run_cases(GetParam(), 1);
  // The hybrid fixtures have 2 key heads in their gated delta nets, which do not split over 4 ranks; the MLX ones
  // 2 groups of 64 inputs in o_proj and down_proj.
  const std::string name = GetParam();
  const bool two_ranks =
      name.starts_with("qwen3_5") || name == "qwen3_next" || name.starts_with("qwen3_mlx") || name == "qwen3_gptq8";
  for (int32_t tp : two_ranks ? std::vector<int32_t>{2} : std::vector<int32_t>{2, 4}) {
    const Outcome split = run_cases(GetParam(), tp);
    ASSERT_EQ(split.tokens.size(), whole.tokens.size());
    float diff = 0;
    for (size_t i = 0; i < whole.tokens.size(); ++i) {
      EXPECT_EQ(split.tokens[i], whole.tokens[i]) << GetParam() << " tp " << tp << " request " << i;
      for (size_t v = 0; v < std::min(whole.first_logits[i].size(), split.first_logits[i].size()); ++v)
        diff = std::max(diff, std::abs(split.first_logits[i][v] - whole.first_logits[i][v]));
    }
    EXPECT_LE(diff, kLogitTolerance) << GetParam() << " tp " << tp;
    std::printf("[%s] tp %d: %zu requests, greedy tokens identical to tp 1; max |logit diff| %.2e\n", GetParam(), tp,
                whole.tokens.size(), diff);
  }
}

// llama: 2 KV heads, so 4 ranks replicate them; qwen3: a tied head (the embedding's rows split) and q/k norms;
// qwen3_moe: experts split by their width; llama_bf16: bf16 weights; gpt_oss: windows, sinks, attention biases and
// stacked clamped-SwiGLU experts with biases; qwen3_next (fused projections grouped per key head, gated attention,
// MoE with a shared expert) and qwen3_5 (q | k | v sections): gated delta nets split by key heads, their recurrent
// state in each rank's own pool (copied with rank 0's when the prefix cache snapshots it); qwen3_5_moe: the same with
// MoE and a shared expert, from a nested (text_config) config. Integer weights: MLX 4- and 3-bit (the quantized
// tied embedding split by vocabulary), GGUF K-quants and Q4_0 (scales and biases follow their codes), a GGUF MoE;
// AWQ and GPTQ 4- and 8-bit (input-major tensors; GPTQ's g_idx renumbered per rank); FP8 in 32 x 32 blocks, per
// channel (compressed-tensors), and per tensor for o_proj beside per-channel experts.
INSTANTIATE_TEST_SUITE_P(Fixtures, TensorParallelTest,
                         ::testing::Values("llama", "llama_bf16", "qwen3", "qwen3_moe", "gpt_oss", "qwen3_next",
                                           "qwen3_5", "qwen3_5_moe", "qwen3_mlx4", "qwen3_mlx3", "qwen3_gguf_k",
                                           "qwen3_gguf_q4", "qwen3_moe_gguf_k", "qwen3_5_gguf", "qwen3_awq",
                                           "qwen3_gptq", "qwen3_gptq8", "qwen3_fp8", "qwen3_fp8_channel",
                                           "qwen3_moe_fp8_ct"));

// A fixture's config, edited, with dummy weights (the same values at every size): greedy tokens at each of `sizes`
// against 1 rank.
void expect_dummy_split(const std::string& name, const std::function<void(json&)>& edit,
                        std::initializer_list<int32_t> sizes) {
  const fs::path dir = fs::temp_directory_path() / ("rs_tp_dummy_" + name);
  fs::create_directories(dir);
  {
    std::ifstream in(fixture(name) / "config.json");
    json config = json::parse(in);
    edit(config);
    std::ofstream(dir / "config.json") << config.dump();
  }
  const std::vector<int32_t> prompt = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
  std::vector<int32_t> whole;
  for (int32_t tp : sizes) {
    engine::EngineConfig config;
    config.num_threads = 2;
    config.exact_f32 = true;
    config.load_format = "dummy";
    config.kv_cache_gb = 0.06;  // the whole budget: four ranks hold a replica of a KV head each
    config.context_length = 256;
    config.tensor_parallel_size = tp;
    serving::Driver driver(dir.string(), config, sched::SchedulerConfig{}, serving::DriverOptions{});
    const std::vector<int32_t> tokens = driver.generate(prompt, engine::SamplingParams{.temperature = 0.0f}, 16).tokens;
    ASSERT_EQ(tokens.size(), 16u);
    if (tp == 1)
      whole = tokens;
    else
      EXPECT_EQ(tokens, whole) << name << " tp " << tp;
  }
  fs::remove_all(dir);
}

// Expert parallelism: whole experts, a block per rank (gpt_oss_mxfp4's 96-wide MXFP4 experts need no split of
// their width; qwen3_moe_mlx4's experts no split of their groups).
class ExpertParallelTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ExpertParallelTest, GreedyTokensOfTheUnsplitModel) {
  const std::string name = GetParam();
  const Outcome whole = run_cases(name, 1);
  const bool hybrid = name.starts_with("qwen3_5") || name.starts_with("qwen3_next");  // 2 key heads: 2 ranks
  for (int32_t tp : hybrid ? std::vector<int32_t>{2} : std::vector<int32_t>{2, 4}) {
    const Outcome split = run_cases(name, tp, /*expert_parallel=*/true);
    ASSERT_EQ(split.tokens.size(), whole.tokens.size());
    for (size_t i = 0; i < whole.tokens.size(); ++i)
      EXPECT_EQ(split.tokens[i], whole.tokens[i]) << name << " tp " << tp << " (experts) request " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ExpertParallelTest,
                         ::testing::Values("qwen3_moe", "gpt_oss", "gpt_oss_mxfp4", "qwen3_next", "qwen3_5_moe",
                                           "qwen3_moe_mlx4", "qwen3_moe_gguf_k", "qwen3_moe_fp8_ct", "gpt_oss_gguf",
                                           "qwen3_next_gguf"));

// gpt-oss's MXFP4 experts split along whole 32-value blocks: the fixture's 96 intermediate values do not split, so
// its config with 128.
TEST(TensorParallel, GptOssMxfp4ExpertsSplitByBlocks) {
  expect_dummy_split("gpt_oss_mxfp4", [](json& config) { config["intermediate_size"] = 128; }, {1, 2, 4});
}

// Qwen3.5-MoE's fused experts (gate_up [E, 2I, H], the layout its dummy weights take): each half split.
TEST(TensorParallel, Qwen35FusedExpertsSplitEachHalf) {
  expect_dummy_split("qwen3_5_moe", [](json&) {}, {1, 2});
}

TEST(TensorParallel, RefusesWhatItCannotSplitWithTheReason) {
  engine::EngineConfig config;
  config.num_threads = 2;
  config.kv_cache_gb = 0.02;
  config.tensor_parallel_size = 3;
  try {
    engine::Engine engine(fixture("llama"), config);
    FAIL() << "4 heads over 3 ranks was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("does not split over 3 ranks"), std::string::npos) << e.what();
  }
  config.tensor_parallel_size = 2;
  try {
    engine::Engine engine(fixture("gpt_oss_mxfp4"), config);  // 96 = 48 + 48: not whole MXFP4 blocks
    FAIL() << "MXFP4 experts were split inside a block";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("32-value blocks"), std::string::npos) << e.what();
  }
  try {
    engine::Engine engine(fixture("qwen3_gptq_actorder"), config);
    FAIL() << "act-order GPTQ was split";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("act-order"), std::string::npos) << e.what();
  }
  try {
    engine::Engine engine(fixture("qwen3_moe_mlx4"), config);  // experts' down_proj: one group of 32 inputs
    FAIL() << "a group of integer weights was split";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("must be whole groups"), std::string::npos) << e.what();
  }
  config.tensor_parallel_size = 1;
  config.expert_parallel = true;
  try {
    engine::Engine engine(fixture("qwen3_moe"), config);
    FAIL() << "--expert-parallel without ranks was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--expert-parallel"), std::string::npos) << e.what();
  }
  config.expert_parallel = false;
  config.tensor_parallel_size = 4;
  try {
    engine::Engine engine(fixture("qwen3_next"), config);
    FAIL() << "2 key heads were split over 4 ranks";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("linear_num_key_heads 2 does not split over 4"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace rs
