#include "loader/quantization.h"

#include <gtest/gtest.h>

#include "base/error.h"

namespace rs::loader {
namespace {

using nlohmann::json;

TEST(QuantizationConfig, NoneUnlessDeclared) {
  const QuantizationConfig q = parse_quantization_config(json::parse(R"({"hidden_size": 8})"), "config.json");
  EXPECT_EQ(q.method, QuantMethod::kNone);
  EXPECT_FALSE(q.fp8_on_load);
  EXPECT_TRUE(parse_quantization_config(json::object(), "c", "fp8").fp8_on_load);
}

TEST(QuantizationConfig, FineGrainedFp8) {
  const json config = json::parse(R"({"quantization_config": {"quant_method": "fp8", "activation_scheme": "dynamic",
      "fmt": "e4m3", "weight_block_size": [128, 64], "modules_to_not_convert": ["lm_head"]}})");
  const QuantizationConfig q = parse_quantization_config(config, "config.json");
  EXPECT_EQ(q.method, QuantMethod::kFp8);
  EXPECT_TRUE(q.is_fp8());
  EXPECT_EQ(q.block_rows, 128);
  EXPECT_EQ(q.block_cols, 64);
}

TEST(QuantizationConfig, CompressedTensorsFp8) {
  const json config = json::parse(R"({"quantization_config": {"quant_method": "compressed-tensors",
      "format": "float-quantized", "ignore": ["lm_head"], "config_groups": {"group_0": {"targets": ["Linear"],
      "weights": {"num_bits": 8, "type": "float", "strategy": "channel", "symmetric": true, "dynamic": false},
      "input_activations": {"num_bits": 8, "type": "float", "strategy": "token", "dynamic": true}}}}})");
  const QuantizationConfig q = parse_quantization_config(config, "config.json");
  EXPECT_EQ(q.method, QuantMethod::kCompressedTensors);
  EXPECT_TRUE(q.is_fp8());
}

TEST(QuantizationConfig, MlxAffine) {
  // mlx_lm writes the same object under both keys, with per-module overrides (an object, or false: not quantized).
  const json config = json::parse(R"({"quantization": {"group_size": 32, "bits": 4, "model.layers.0.mlp.gate":
      {"group_size": 64, "bits": 8}, "model.layers.1.self_attn.o_proj": false}, "quantization_config":
      {"group_size": 32, "bits": 4}})");
  const QuantizationConfig q = parse_quantization_config(config, "config.json");
  EXPECT_EQ(q.method, QuantMethod::kMlxAffine);
  EXPECT_TRUE(q.is_integer());
  EXPECT_EQ(q.bits, 4);
  EXPECT_EQ(q.group_size, 32);
  EXPECT_EQ(parse_quantization_config(json::parse(R"({"quantization": {"bits": 8, "group_size": 128}})"), "c").bits, 8);
}

TEST(QuantizationConfig, AwqAndGptq) {
  const QuantizationConfig awq = parse_quantization_config(
      json::parse(R"({"quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": true,
      "version": "gemm", "modules_to_not_convert": null}})"),
      "c");
  EXPECT_EQ(awq.method, QuantMethod::kAwq);
  EXPECT_EQ(awq.group_size, 128);
  const QuantizationConfig gptq = parse_quantization_config(
      json::parse(R"({"quantization_config": {"quant_method": "gptq", "bits": 8, "group_size": 64, "desc_act": false,
      "sym": true}})"),
      "c");
  EXPECT_EQ(gptq.method, QuantMethod::kGptq);
  EXPECT_EQ(gptq.bits, 8);
  EXPECT_TRUE(gptq.gptq_zero_minus_one);  // the v1 checkpoint format is the default
  EXPECT_FALSE(parse_quantization_config(json::parse(R"({"quantization_config": {"quant_method": "gptq",
      "checkpoint_format": "gptq_v2"}})"),
                                         "c")
                   .gptq_zero_minus_one);
}

TEST(QuantizationConfig, RefusesWhatItCannotLoad) {
  const auto message = [](const char* text, const std::string& on_load = "") {
    try {
      parse_quantization_config(json::parse(text), "m/config.json", on_load);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message(R"({"quantization_config": {"quant_method": "bitsandbytes"}})").find("'bitsandbytes' is not"),
            std::string::npos);
  EXPECT_NE(message(R"({"quantization_config": {"quant_method": "awq", "bits": 3}})").find("AWQ with 3 bits"),
            std::string::npos);
  EXPECT_NE(message(R"({"quantization_config": {"quant_method": "awq", "version": "gemv"}})").find("'gemv'"),
            std::string::npos);
  EXPECT_NE(message(R"({"quantization_config": {"quant_method": "gptq", "group_size": -1}})").find("group_size -1"),
            std::string::npos);
  EXPECT_NE(message(R"({"quantization": {"group_size": 64, "bits": 7}})").find("7 bits"), std::string::npos);
  EXPECT_NE(message(R"({"quantization": {"group_size": 64, "bits": 4, "m.q": {"group_size": 48, "bits": 4}}})")
                .find("module 'm.q' has group size 48"),
            std::string::npos);
  EXPECT_NE(message(R"({"quantization": {"group_size": 64, "bits": 4, "mode": "mxfp8"}})").find("'mxfp8'"),
            std::string::npos);
  EXPECT_NE(message(R"({"quantization_config": {"quant_method": "gptq", "sym": "yes"}})").find("'sym' must be"),
            std::string::npos);
  EXPECT_NE(message(R"({"quantization_config": {"quant_method": "compressed-tensors", "format": "pack-quantized",
      "config_groups": {"g": {"weights": {"num_bits": 4, "type": "int"}}}}})")
                .find("pack-quantized"),
            std::string::npos);
  EXPECT_NE(message(R"({"quantization_config": {"quant_method": "compressed-tensors", "config_groups": {"g":
      {"weights": {"num_bits": 8, "type": "int", "strategy": "channel"}}}}})")
                .find("only 8-bit float"),
            std::string::npos);
  EXPECT_NE(message(R"({"quantization_config": {"quant_method": "fp8"}})", "fp8").find("already quantized"),
            std::string::npos);
  EXPECT_NE(message(R"({})", "int4").find("--quantization 'int4'"), std::string::npos);
  // Wrong JSON types are rs::Errors naming the field, never a JSON library exception.
  EXPECT_NE(message(R"({"quantization_config": {"quant_method": 7}})").find("'quant_method' must be a string"),
            std::string::npos);
  EXPECT_NE(message(R"({"quantization_config": {"quant_method": "fp8", "weight_block_size": [128, "x"]}})")
                .find("weight_block_size must be two positive integers"),
            std::string::npos);
  EXPECT_NE(message(R"({"quantization_config": {"quant_method": "compressed-tensors", "config_groups": {"g":
      {"weights": {"num_bits": "8", "type": "float"}}}}})")
                .find("'num_bits' must be an integer"),
            std::string::npos);
}

}  // namespace
}  // namespace rs::loader
