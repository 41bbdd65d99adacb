#include "loader/checkpoint.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "loader/dummy_layout.h"
#include "loader/hf_config.h"
#include "loader/weight_source.h"

namespace rs::loader {
namespace {
namespace fs = std::filesystem;

fs::path temp_dir(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("rs_safetensors_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// Writes a safetensors file; pad_header aligns the data start to 8 bytes as real writers do.
void write_file(const fs::path& path, std::string header, const std::string& data, bool pad_header = true) {
  if (pad_header)
    while ((8 + header.size()) % 8) header += ' ';
  std::ofstream out(path, std::ios::binary);
  const uint64_t n = header.size();
  out.write(reinterpret_cast<const char*>(&n), 8);
  out << header << data;
}

// Two f32 tensors: a [2] = {1, 2} and b [1] = {3}.
void write_valid(const fs::path& path, const std::string& a = "a", const std::string& b = "b") {
  float values[3] = {1, 2, 3};
  write_file(path,
             R"({")" + a + R"(":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},")" + b +
                 R"(":{"dtype":"F32","shape":[1],"data_offsets":[8,12]},"__metadata__":{"format":"pt"}})",
             std::string(reinterpret_cast<const char*>(values), 12));
}

std::string error_of(const fs::path& path) {
  try {
    CheckpointFile file(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Safetensors, ReadsTensors) {
  auto dir = temp_dir("ok");
  write_valid(dir / "model.safetensors");
  Checkpoint checkpoint(dir);
  Tensor a = checkpoint.tensor("a");
  EXPECT_EQ(a.dim(0), 2);
  EXPECT_EQ(a.data_as<float>()[1], 2.0f);
  EXPECT_EQ(checkpoint.tensor("b").data_as<float>()[0], 3.0f);
  EXPECT_THROW(checkpoint.tensor("c"), Error);
}

TEST(Safetensors, ReadsShardsFromIndex) {
  auto dir = temp_dir("sharded");
  write_valid(dir / "model-00001-of-00002.safetensors", "a", "b");
  write_valid(dir / "model-00002-of-00002.safetensors", "c", "d");
  std::ofstream(dir / "model.safetensors.index.json")
      << R"({"metadata":{"total_size":24},"weight_map":{"a":"model-00001-of-00002.safetensors","b":"model-00001-of-00002.safetensors","c":"model-00002-of-00002.safetensors","d":"model-00002-of-00002.safetensors"}})";
  Checkpoint checkpoint(dir);
  EXPECT_EQ(checkpoint.tensor("c").data_as<float>()[0], 1.0f);
  EXPECT_EQ(checkpoint.names().size(), 4u);
}

TEST(Safetensors, MalformedFilesNameFileAndTensor) {
  auto dir = temp_dir("bad");
  write_file(dir / "notjson.safetensors", "{not json", "");
  EXPECT_NE(error_of(dir / "notjson.safetensors").find("not valid JSON"), std::string::npos);
  write_file(dir / "dtype.safetensors", R"({"w":{"dtype":"Q9","shape":[1],"data_offsets":[0,1]}})", "x");
  auto err = error_of(dir / "dtype.safetensors");
  EXPECT_NE(err.find("'w'"), std::string::npos);
  EXPECT_NE(err.find("unknown dtype"), std::string::npos);
  EXPECT_NE(err.find("dtype.safetensors"), std::string::npos);
  write_file(dir / "short.safetensors", R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", "12345678");
  EXPECT_NE(error_of(dir / "short.safetensors").find("truncated"), std::string::npos);
  write_file(dir / "size.safetensors", R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", "12345678");
  EXPECT_NE(error_of(dir / "size.safetensors").find("needs 12 bytes"), std::string::npos);
  write_file(dir / "huge.safetensors", R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})",
             "12345678");
  EXPECT_NE(error_of(dir / "huge.safetensors").find("too large"), std::string::npos);
  write_file(dir / "offset.safetensors",
             R"({"w":{"dtype":"U8","shape":[8],"data_offsets":[18446744073709551608,18446744073709551615]}})", "1");
  EXPECT_NE(error_of(dir / "offset.safetensors").find("'w'"), std::string::npos);
  std::ofstream(dir / "tiny.safetensors") << "abc";
  EXPECT_NE(error_of(dir / "tiny.safetensors").find("too short"), std::string::npos);
  // A valid file cut in half.
  write_valid(dir / "cut.safetensors");
  fs::resize_file(dir / "cut.safetensors", fs::file_size(dir / "cut.safetensors") - 6);
  EXPECT_NE(error_of(dir / "cut.safetensors").find("truncated"), std::string::npos);
}

TEST(WeightSource, ChecksShapesAgainstConfig) {
  auto dir = temp_dir("shape");
  write_valid(dir / "model.safetensors");
  auto source = WeightSource::checkpoint(dir);
  EXPECT_EQ(source.require("a", {2}).numel(), 2);
  try {
    source.require("a", {3});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tensor 'a' has shape [2], expected [3]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(source.require("zzz", {1}), Error);
}

TEST(WeightSource, CopiesMisalignedTensorsToAlignedMemory) {
  auto dir = temp_dir("unaligned");
  float values[3] = {1, 2, 3};
  // Header of odd length and a 1-byte tensor first: the f32 tensor starts at an odd address.
  write_file(
      dir / "model.safetensors",
      R"({"u":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"f":{"dtype":"F32","shape":[3],"data_offsets":[1,13]}})",
      std::string("\x07") + std::string(reinterpret_cast<const char*>(values), 12), /*pad_header=*/false);
  auto source = WeightSource::checkpoint(dir);
  Tensor f = source.require("f", {3});
  EXPECT_EQ(reinterpret_cast<uintptr_t>(f.data()) % alignof(float), 0u);
  EXPECT_EQ(f.data_as<float>()[2], 3.0f);
}

TEST(WeightSource, DummyIsSeededAndSensible) {
  auto a = WeightSource::dummy(7, DType::kBF16);
  auto b = WeightSource::dummy(7, DType::kBF16);
  Tensor wa = a.require("model.layers.0.mlp.up_proj.weight", {8, 8});
  Tensor wb = b.require("model.layers.0.mlp.up_proj.weight", {8, 8});
  EXPECT_EQ(std::memcmp(wa.data(), wb.data(), wa.bytes()), 0);
  Tensor norm = a.require("model.norm.weight", {8});
  EXPECT_EQ(bf16_to_f32(norm.data_as<uint16_t>()[3]), 1.0f);
  float max_abs = 0;
  for (int i = 0; i < 64; ++i) max_abs = std::max(max_abs, std::abs(bf16_to_f32(wa.data_as<uint16_t>()[i])));
  EXPECT_GT(max_abs, 0.0f);
  EXPECT_LE(max_abs, 0.021f);
}

// A dummy source stands for the layout its config's releases ship: contains() answers for the layout's marker names
// only (and info() for none: dummy tensors have no stored form), so models choose by names alone.
TEST(WeightSource, DummyLayoutFollowsTheConfig) {
  const std::filesystem::path configs = std::filesystem::path(RS_SOURCE_DIR) / "configs";
  const auto source_for = [&](const char* dir) {
    return WeightSource::dummy(1, DType::kBF16, dummy_layout(load_model_config(configs / dir)));
  };
  const WeightSource next = source_for("Qwen3-Next-80B-A3B");
  EXPECT_TRUE(next.contains("model.layers.0.linear_attn.in_proj_qkvz.weight"));
  EXPECT_FALSE(next.contains("model.layers.0.linear_attn.in_proj_qkv.weight"));  // Qwen3.5's split layout
  EXPECT_FALSE(next.info("model.layers.0.linear_attn.in_proj_qkvz.weight").has_value());
  const WeightSource qwen35 = source_for("Qwen3.5-9B");
  EXPECT_FALSE(qwen35.contains("model.layers.0.linear_attn.in_proj_qkvz.weight"));
  const WeightSource gpt_oss = source_for("gpt-oss-20b");
  EXPECT_TRUE(gpt_oss.contains("model.layers.3.mlp.experts.gate_up_proj_blocks"));
  EXPECT_FALSE(gpt_oss.contains("model.layers.3.mlp.experts.gate_up_proj_bias"));
  EXPECT_TRUE(source_for("Qwen3.5-35B-A3B").contains("model.language_model.layers.0.mlp.experts.gate_up_proj"));
  EXPECT_FALSE(source_for("Qwen3-30B-A3B").contains("model.layers.0.mlp.experts.gate_up_proj"));
  EXPECT_FALSE(source_for("Qwen3-8B").contains("model.layers.0.self_attn.q_proj.weight"));
}

}  // namespace
}  // namespace rs::loader
