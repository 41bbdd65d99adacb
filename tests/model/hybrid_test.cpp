// Hybrid gated-delta-net models end to end on seeded dummy weights (the transformers goldens of golden_test.cpp pin
// the numerics): whole prefill, chunked prefill and token-by-token decode give the same logits, the engine sizes one
// state slot per running request and KV pages only for the attention layers, and bad setups fail clearly.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "engine/engine.h"
#include "serving/driver.h"

namespace rs {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

json text_config() {
  return json::parse(R"({"hidden_size":64,"intermediate_size":96,"num_hidden_layers":4,"num_attention_heads":4,
    "num_key_value_heads":2,"head_dim":16,"vocab_size":300,"linear_num_key_heads":2,"linear_num_value_heads":4,
    "linear_key_head_dim":16,"linear_value_head_dim":8,"linear_conv_kernel_dim":4,"full_attention_interval":2,
    "max_position_embeddings":2048,"rms_norm_eps":1e-6,"tie_word_embeddings":false,
    "rope_parameters":{"rope_type":"default","rope_theta":10000,"partial_rotary_factor":0.5}})");
}

json config_for(const std::string& architecture) {
  json text = text_config();
  if (architecture == "Qwen3_5ForCausalLM") {
    text["model_type"] = "qwen3_5_text";
  } else {
    text["model_type"] = architecture == "Qwen3NextForCausalLM" ? "qwen3_next" : "qwen3_5_moe_text";
    text["num_experts"] = 4;
    text["num_experts_per_tok"] = 2;
    text["moe_intermediate_size"] = 32;
    text["shared_expert_intermediate_size"] = 48;
    if (architecture == "Qwen3NextForCausalLM") text["mlp_only_layers"] = {0};
  }
  if (architecture.find("ForConditionalGeneration") == std::string::npos) {
    text["architectures"] = {architecture};
    text["dtype"] = "float32";
    return text;
  }
  return json{
      {"architectures", {architecture}}, {"model_type", "qwen3_5_moe"}, {"dtype", "float32"}, {"text_config", text}};
}

fs::path write_model(const std::string& architecture) {
  const fs::path dir = fs::temp_directory_path() / ("rs_hybrid_" + architecture + "_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << config_for(architecture).dump();
  return dir;
}

engine::EngineConfig dummy_config() {
  engine::EngineConfig config;
  config.num_threads = 2;
  config.exact_f32 = true;
  config.load_format = "dummy";
  config.kv_cache_gb = 0.02;
  config.max_running_requests = 3;
  config.context_length = 1024;
  config.max_step_tokens = 512;
  return config;
}

const engine::SamplingParams kGreedy{.temperature = 0.0f};

// `serve`'s scheduler stepped on this thread, one request at a time, prompts prefilled `chunk` tokens per step; no
// prefix cache (each prefill is the whole of its prompt or its chunks).
std::unique_ptr<serving::Driver> make_driver(const fs::path& dir, int chunk) {
  sched::SchedulerConfig scheduler;
  scheduler.max_running_requests = 1;
  scheduler.chunked_prefill_size = std::min(chunk, 512);
  scheduler.max_prefill_tokens = 512;
  scheduler.prefix_cache = false;
  return std::make_unique<serving::Driver>(dir.string(), dummy_config(), scheduler,
                                           serving::DriverOptions{.keep_logits = true});
}

float max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff = std::max(diff, std::abs(a[i] - b[i]));
  return diff;
}

float max_abs(const std::vector<float>& a) {
  float m = 0;
  for (float v : a) m = std::max(m, std::abs(v));
  return m;
}

class HybridModelTest : public ::testing::TestWithParam<std::string> {};

TEST_P(HybridModelTest, ChunkedPrefillAndDecodeMatchWholePrefill) {
  const fs::path dir = write_model(GetParam());
  std::mt19937 rng(5);
  std::vector<int32_t> prompt(296);
  for (auto& id : prompt) id = static_cast<int32_t>(rng() % 300);
  auto whole = make_driver(dir, 512);
  for (int chunk : {7, 64, 100}) {
    // The prompt in chunks, then 4 decode steps (the recurrent form continuing the chunked one): 5 logit rows.
    const serving::Completion chunked = make_driver(dir, chunk)->generate(prompt, kGreedy, 5);
    ASSERT_EQ(chunked.logits.size(), 5u);
    // Against whole prefills of the prompt and the tokens decoded so far: the last position's logits.
    std::vector<int32_t> context = prompt;
    for (int step = 0; step < 5; ++step) {
      const std::vector<float> want = whole->generate(context, kGreedy, 1).logits.at(0);
      ASSERT_GT(max_abs(want), 0.0f);
      EXPECT_LT(max_diff(chunked.logits[step], want), 1e-4f * max_abs(want) + 1e-6f)
          << "chunk " << chunk << (step ? ", decode step " + std::to_string(step) : ", prefill");
      if (step == 1) {  // positions really differ
        EXPECT_GT(max_diff(chunked.logits[0], want), 1e-4f * max_abs(want));
      }
      context.push_back(chunked.tokens[step]);
    }
  }
  fs::remove_all(dir);
}

TEST_P(HybridModelTest, StateSlotsPerRunningRequestAndKvOnlyForAttentionLayers) {
  const fs::path dir = write_model(GetParam());
  engine::Engine engine(dir, dummy_config());
  EXPECT_EQ(engine.state_pool().num_slots(), 6);  // auto: one per running request (3), as many for snapshots
  EXPECT_EQ(engine.state_pool().geometry().layers, (std::vector<int32_t>{0, 2}));
  ASSERT_EQ(engine.kv_pool().num_groups(), 1);
  EXPECT_EQ(engine.kv_pool().group(0).layers, (std::vector<int32_t>{1, 3}));
  engine::EngineConfig config = dummy_config();
  config.num_state_slots = 5;
  EXPECT_EQ(engine::Engine(dir, config).state_pool().num_slots(), 5);
  config.num_state_slots = 60000;  // more state than the whole budget
  try {
    engine::Engine too_many(dir, config);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--num-state-slots"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Architectures, HybridModelTest,
                         ::testing::Values("Qwen3NextForCausalLM", "Qwen3_5ForCausalLM",
                                           "Qwen3_5MoeForConditionalGeneration"));

}  // namespace
}  // namespace rs
