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

TEST(HfConfig, Eagle3HeadCapturesThreeTargetLayers) {
  json raw = json::parse(R"({"architectures":["LlamaForCausalLMEagle3"],"hidden_size":64,"num_hidden_layers":1,
    "num_attention_heads":4,"num_key_value_heads":2,"vocab_size":512,"draft_vocab_size":128,
    "intermediate_size":128})");
  ModelConfig config = parse_model_config(raw, "c");
  EXPECT_TRUE(config.is_eagle3());
  EXPECT_EQ(config.logits_width(), 128);
  EXPECT_EQ(config.eagle_target_hidden, 64);
  EXPECT_EQ(config.eagle_capture_layers(32), (std::vector<int32_t>{2, 16, 29}));  // SGLang's 2, L/2, L-3
  raw["eagle_config"] = {{"eagle_aux_hidden_state_layer_ids", {1, 15, 28}}};
  EXPECT_EQ(parse_model_config(raw, "c").eagle_capture_layers(32), (std::vector<int32_t>{2, 16, 29}));
  raw["eagle_config"] = {{"eagle_aux_hidden_state_layer_ids", {1, 15, 40}}};
  EXPECT_THROW(parse_model_config(raw, "c").eagle_capture_layers(32), Error);
  raw["draft_vocab_size"] = 600;  // more draft tokens than the vocabulary
  EXPECT_THROW(parse_model_config(raw, "c"), Error);
  EXPECT_FALSE(parse_model_config(base_config(), "c").is_eagle3());
  EXPECT_EQ(parse_model_config(base_config(), "c").logits_width(), 100);
}

TEST(HfConfig, Eagle3LmHeadIsOwnTiedOrTheTargets) {
  json raw = json::parse(R"({"architectures":["LlamaForCausalLMEagle3"],"hidden_size":64,"num_hidden_layers":1,
    "num_attention_heads":4,"num_key_value_heads":2,"vocab_size":512,"draft_vocab_size":128,
    "intermediate_size":128})");
  using EagleLmHead = ModelConfig::EagleLmHead;
  EXPECT_EQ(parse_model_config(raw, "c").eagle_lm_head, EagleLmHead::kOwn);
  raw.erase("draft_vocab_size");  // SGLang: no draft vocabulary means the target's LM head
  ModelConfig shared = parse_model_config(raw, "c");
  EXPECT_EQ(shared.eagle_lm_head, EagleLmHead::kTargetHead);
  EXPECT_EQ(shared.logits_width(), 512);
  raw["tie_word_embeddings"] = true;
  EXPECT_EQ(parse_model_config(raw, "c").eagle_lm_head, EagleLmHead::kTargetEmbedding);
  raw["draft_vocab_size"] = 128;  // a tied head predicts the whole vocabulary
  EXPECT_THROW(parse_model_config(raw, "c"), Error);
}

// z-lab's DFlash drafters (its DFlash2 fixture's layout, with DFlash's architecture): dflash_config's keys, the
// taps at target_layer_ids + 1, causality per layer.
TEST(HfConfig, DFlashDrafter) {
  json raw = json::parse(R"({"architectures":["DFlashDraftModel"],"model_type":"qwen3","hidden_size":64,
    "num_hidden_layers":3,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":16,"intermediate_size":128,
    "vocab_size":512,"num_target_layers":52,"is_causal":false,
    "dflash_config":{"block_size":16,"mask_token_id":500,"target_layer_ids":[1,13,25,37,49],
                     "output_multiplier":0.19,"final_logit_softcapping":20.0}})");
  ModelConfig config = parse_model_config(raw, "c");
  EXPECT_TRUE(config.is_dflash());
  EXPECT_TRUE(config.is_draft_head());
  EXPECT_FALSE(config.is_eagle3());
  EXPECT_FALSE(config.embedding_detected);  // "...DraftModel" is no base model
  EXPECT_EQ(config.dflash.block_size, 16);
  EXPECT_EQ(config.dflash.mask_token_id, 500);
  EXPECT_EQ(config.logits_width(), 512);
  EXPECT_EQ(config.draft_capture_layers(52), (std::vector<int32_t>{2, 14, 26, 38, 50}));
  EXPECT_THROW(config.draft_capture_layers(40), Error);  // layer 49 of a 40-layer target
  EXPECT_EQ(config.dflash.causal, (std::vector<bool>{false, false, false}));
  // Without is_causal, z-lab's model makes sliding_attention layers causal and the others not.
  raw.erase("is_causal");
  raw["sliding_window"] = 2048;
  raw["layer_types"] = {"sliding_attention", "full_attention", "sliding_attention"};
  EXPECT_EQ(parse_model_config(raw, "c").dflash.causal, (std::vector<bool>{true, false, true}));
  // The keys may also sit at the top level.
  json flat = raw;
  flat.erase("dflash_config");
  flat["block_size"] = 8;
  flat["mask_token_id"] = 7;
  flat["target_layer_ids"] = {0, 2};
  EXPECT_EQ(parse_model_config(flat, "c").dflash.block_size, 8);
  EXPECT_EQ(parse_model_config(flat, "c").draft_capture_layers(4), (std::vector<int32_t>{1, 3}));
  json bad = raw;
  bad["dflash_config"]["mask_token_id"] = 512;  // outside the vocabulary
  EXPECT_THROW(parse_model_config(bad, "c"), Error);
  bad = raw;
  bad["dflash_config"].erase("target_layer_ids");
  EXPECT_THROW(parse_model_config(bad, "c"), Error);
  bad = raw;
  bad["dflash_config"]["input_embedding_scale"] = 2.0;
  EXPECT_THROW(parse_model_config(bad, "c"), Error);
  bad = raw;
  bad["architectures"] = {"DFlash2DraftModel"};  // grouped convolutions and a candidate selector: not built
  try {
    parse_model_config(bad, "c");
    FAIL() << "DFlash2 must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("DFlash2DraftModel"), std::string::npos) << e.what();
  }
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

namespace rs::loader {
namespace {

json qwen3_5_text() {
  return json::parse(R"({"model_type":"qwen3_5_text","hidden_size":64,"num_hidden_layers":6,"num_attention_heads":4,
    "num_key_value_heads":2,"vocab_size":100,"linear_num_key_heads":2,"linear_num_value_heads":4,
    "linear_key_head_dim":8,"linear_value_head_dim":16,"linear_conv_kernel_dim":4,"full_attention_interval":3,
    "rope_parameters":{"rope_type":"default","rope_theta":10000000,"mrope_section":[11,11,10],
                       "mrope_interleaved":true}})");
}

TEST(HfConfig, HybridLayerPatternFromInterval) {
  json raw = qwen3_5_text();
  raw["architectures"] = {"Qwen3_5ForCausalLM"};
  const ModelConfig config = parse_model_config(raw, "c");
  using K = LayerKind;
  EXPECT_EQ(config.layer_kinds, (std::vector<K>{K::kLinearAttention, K::kLinearAttention, K::kAttention,
                                                K::kLinearAttention, K::kLinearAttention, K::kAttention}));
  EXPECT_TRUE(config.is_hybrid());
  EXPECT_EQ(config.linear.conv_channels(), 2 * 2 * 8 + 4 * 16);
  EXPECT_EQ(config.head_dim, 256);                            // transformers' default for the hybrid configs
  EXPECT_DOUBLE_EQ(config.rope.partial_rotary_factor, 0.25);  // likewise
  EXPECT_EQ(config.rope.theta, 10000000);
  EXPECT_TRUE(config.attn_output_gate);
  EXPECT_EQ(config.weight_prefix, "model.");
}

TEST(HfConfig, ConditionalGenerationReadsTextConfigAndLanguageModelPrefix) {
  json raw = {{"architectures", {"Qwen3_5MoeForConditionalGeneration"}},
              {"model_type", "qwen3_5_moe"},
              {"tie_word_embeddings", false}};
  raw["text_config"] = qwen3_5_text();
  raw["text_config"]["model_type"] = "qwen3_5_moe_text";
  raw["text_config"]["num_experts"] = 8;
  raw["text_config"]["num_experts_per_tok"] = 2;
  raw["text_config"]["moe_intermediate_size"] = 32;
  raw["text_config"]["shared_expert_intermediate_size"] = 48;
  raw["text_config"]["layer_types"] = {"linear_attention", "full_attention",   "linear_attention",
                                       "linear_attention", "linear_attention", "full_attention"};
  raw["text_config"]["head_dim"] = 32;
  raw["text_config"]["rope_parameters"]["partial_rotary_factor"] = 0.5;
  const ModelConfig config = parse_model_config(raw, "c");
  EXPECT_EQ(config.weight_prefix, "model.language_model.");
  EXPECT_EQ(config.num_layers_of(LayerKind::kAttention), 2);
  EXPECT_EQ(config.layer_kinds[1], LayerKind::kAttention);
  EXPECT_EQ(config.head_dim, 32);
  EXPECT_DOUBLE_EQ(config.rope.partial_rotary_factor, 0.5);
  EXPECT_TRUE(config.norm_topk_prob);  // Qwen3.5-MoE always renormalises
  EXPECT_EQ(config.shared_expert_intermediate_size, 48);
  EXPECT_TRUE(config.is_moe_layer(0));
}

TEST(HfConfig, LinearAttentionOnlyForHybridModelsAndWithSaneShapes) {
  json raw = base_config();
  raw["layer_types"] = {"linear_attention", "full_attention", "full_attention", "full_attention"};
  try {
    parse_model_config(raw, "c");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layer_types[0] = 'linear_attention' is not supported"), std::string::npos);
  }
  json hybrid = qwen3_5_text();
  hybrid["architectures"] = {"Qwen3NextForCausalLM"};
  hybrid["model_type"] = "qwen3_next";
  hybrid["linear_num_value_heads"] = 3;  // not a multiple of 2 key heads
  EXPECT_THROW(parse_model_config(hybrid, "c"), Error);
  hybrid["linear_num_value_heads"] = 4;
  hybrid["linear_conv_kernel_dim"] = 1;
  EXPECT_THROW(parse_model_config(hybrid, "c"), Error);
}

}  // namespace
}  // namespace rs::loader

namespace rs::loader {
namespace {

// The EAGLE-3 head of Llama-3.1-8B (configs/, for dummy-weight benchmarks) reads SGLang's default layers.
TEST(HfConfig, Eagle3ReleaseConfig) {
  const ModelConfig config =
      load_model_config(std::filesystem::path(RS_SOURCE_DIR) / "configs" / "EAGLE3-LLaMA3.1-Instruct-8B");
  EXPECT_TRUE(config.is_eagle3());
  EXPECT_EQ(config.logits_width(), 32000);
  EXPECT_EQ(config.eagle_capture_layers(32), (std::vector<int32_t>{2, 16, 29}));
}

// The dummy-weight configs of the hybrid releases (configs/) read as their architectures need.
TEST(HfConfig, HybridReleaseConfigs) {
  const std::filesystem::path root = std::filesystem::path(RS_SOURCE_DIR) / "configs";
  struct Expect {
    const char* dir;
    int32_t layers, attention_layers, experts;
    const char* prefix;
  };
  for (const Expect& e :
       {Expect{"Qwen3-Next-80B-A3B", 48, 12, 512, "model."}, Expect{"Qwen3.5-9B", 32, 8, 0, "model.language_model."},
        Expect{"Qwen3.5-35B-A3B", 40, 10, 256, "model.language_model."}}) {
    const ModelConfig config = load_model_config(root / e.dir);
    EXPECT_EQ(config.num_layers, e.layers) << e.dir;
    EXPECT_EQ(config.num_layers_of(LayerKind::kAttention), e.attention_layers) << e.dir;
    EXPECT_EQ(config.layer_kinds[3], LayerKind::kAttention) << e.dir;
    EXPECT_EQ(config.num_experts, e.experts) << e.dir;
    EXPECT_EQ(config.weight_prefix, e.prefix) << e.dir;
    EXPECT_EQ(config.head_dim, 256) << e.dir;
    EXPECT_DOUBLE_EQ(config.rope.partial_rotary_factor, 0.25) << e.dir;
    EXPECT_EQ(config.linear.conv_channels(), 2 * 16 * 128 + 32 * 128) << e.dir;
  }
}

}  // namespace
}  // namespace rs::loader
