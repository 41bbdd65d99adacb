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

TEST(QuantizationConfig, RefusesWhatItCannotLoad) {
  const auto message = [](const char* text, const std::string& on_load = "") {
    try {
      parse_quantization_config(json::parse(text), "m/config.json", on_load);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message(R"({"quantization_config": {"quant_method": "awq", "bits": 4}})").find("'awq' is not supported"),
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
