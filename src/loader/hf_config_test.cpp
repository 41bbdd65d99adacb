#include "loader/hf_config.h"

#include <gtest/gtest.h>

#include "base/error.h"

namespace rs::loader {
namespace {
using nlohmann::json;

json base_config() {
  return json::parse(R"({"architectures":["GptOssForCausalLM"],"model_type":"gpt_oss","hidden_size":64,
    "num_hidden_layers":4,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":16,"vocab_size":100,
    "sliding_window":8,"num_local_experts":4,"experts_per_token":2,"eos_token_id":3,
    "rope_scaling":{"rope_type":"yarn","factor":32.0,"beta_fast":32.0,"beta_slow":1.0,
                    "original_max_position_embeddings":4096,"truncate":false},"rope_theta":150000})");
}

TEST(HfConfig, GptOssDefaultsAlternateWindows) {
  ModelConfig config = parse_model_config(base_config(), "config.json");
  EXPECT_EQ(config.layer_windows, (std::vector<int32_t>{8, 0, 8, 0}));
  EXPECT_EQ(config.num_experts, 4);
  EXPECT_EQ(config.num_experts_per_tok, 2);
  EXPECT_EQ(config.rope.type, "yarn");
  EXPECT_FALSE(config.rope.truncate);
  EXPECT_EQ(config.rope.theta, 150000);
  EXPECT_EQ(config.eos_token_ids, (std::vector<int32_t>{3}));
}

TEST(HfConfig, LayerTypesWin) {
  json raw = base_config();
  raw["layer_types"] = {"full_attention", "sliding_attention", "full_attention", "full_attention"};
  EXPECT_EQ(parse_model_config(raw, "c").layer_windows, (std::vector<int32_t>{0, 8, 0, 0}));
  raw["layer_types"] = {"full_attention"};
  EXPECT_THROW(parse_model_config(raw, "c"), Error);
}

TEST(HfConfig, ErrorsNameTheField) {
  json raw = base_config();
  raw.erase("hidden_size");
  try {
    parse_model_config(raw, "/m/config.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/m/config.json: missing field 'hidden_size'"), std::string::npos);
  }
  raw = base_config();
  raw["num_hidden_layers"] = "four";
  EXPECT_THROW(parse_model_config(raw, "c"), Error);
  raw = base_config();
  raw["rope_scaling"]["rope_type"] = "dynamic_ntk_foo";
  EXPECT_THROW(parse_model_config(raw, "c"), Error);
  // Values that do not fit, or are implausible, are refused before anything is sized by them (found by
  // fuzz_model_config).
  raw = base_config();
  raw["num_hidden_layers"] = 607744444444444444LL;
  EXPECT_THROW(parse_model_config(raw, "c"), Error);
  raw["num_hidden_layers"] = 2000000000;
  EXPECT_THROW(parse_model_config(raw, "c"), Error);
  raw["num_hidden_layers"] = 18446744073709551615ULL;
  EXPECT_THROW(parse_model_config(raw, "c"), Error);
}

}  // namespace
}  // namespace rs::loader
