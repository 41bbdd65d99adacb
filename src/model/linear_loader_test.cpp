// LinearLoader against the committed FP8 fixtures (tools/make_fp8_fixtures.py): every weight it hands out, decoded by
// the format's rule (code value x block scale, rounded once to f32), equals the fixture's independently dequantized
// f32 twin; fused and row-selected weights keep that property; quantization on load stays within FP8's rounding.
#include "model/linear_loader.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "base/error.h"
#include "loader/hf_config.h"

namespace rs::model {
namespace {

namespace fs = std::filesystem;

fs::path fixture(const std::string& name) { return fs::path(RS_SOURCE_DIR) / "tests/data/models" / name; }

float element(const LinearWeight& w, int64_t row, int64_t col) {
  if (w.format == LinearWeight::Format::kDense) {
    return w.weight.dtype() == DType::kF32 ? w.weight.data_as<float>()[row * w.in_features + col]
                                           : bf16_to_f32(w.weight.data_as<uint16_t>()[row * w.in_features + col]);
  }
  const uint8_t code = w.weight.data_as<uint8_t>()[row * w.in_features + col];
  const float scale =
      w.scales.data_as<float>()[(row / w.scale_block_rows) * w.scales.dim(1) + col / w.scale_block_cols];
  return fp8_e4m3_to_f32(code) * scale;
}

// Every element of `w` equals the twin tensor's.
void expect_equals_twin(const LinearWeight& w, const Tensor& twin, const std::string& what) {
  ASSERT_EQ(twin.dim(0), w.out_features) << what;
  ASSERT_EQ(twin.dim(1), w.in_features) << what;
  int mismatches = 0;
  for (int64_t r = 0; r < w.out_features; ++r)
    for (int64_t c = 0; c < w.in_features; ++c)
      mismatches += element(w, r, c) != twin.data_as<float>()[r * w.in_features + c];
  EXPECT_EQ(mismatches, 0) << what;
}

struct Fixture {
  explicit Fixture(const std::string& name)
      : config(loader::load_model_config(fixture(name))),
        weights(loader::WeightSource::checkpoint(fixture(name))),
        twin(loader::WeightSource::checkpoint(fixture(name) / "dequantized")),
        loader(weights, config.quantization, owned) {}
  Tensor twin_of(const std::string& module, int64_t out, int64_t in) {
    return twin.require(module + ".weight", {out, in}, DType::kF32);
  }
  loader::ModelConfig config;
  loader::WeightSource weights, twin;
  std::vector<Buffer> owned;
  LinearLoader loader;
};

TEST(LinearLoader, FineGrainedFp8BlocksMatchTheDequantizedTwin) {
  Fixture f("qwen3_fp8");
  ASSERT_EQ(f.config.quantization.method, loader::QuantMethod::kFp8);
  const std::string p = "model.layers.1.self_attn.";
  const LinearWeight q = f.loader.load(p + "q_proj", 128, 64);
  EXPECT_EQ(q.format, LinearWeight::Format::kFp8);
  EXPECT_EQ(q.scale_block_rows, 32);
  EXPECT_EQ(q.scale_block_cols, 32);
  EXPECT_EQ(q.scales.dim(0), 4);
  EXPECT_EQ(q.scales.dim(1), 2);
  expect_equals_twin(q, f.twin_of(p + "q_proj", 128, 64), "q_proj");
  const LinearWeight o = f.loader.load(p + "o_proj", 64, 128);
  expect_equals_twin(o, f.twin_of(p + "o_proj", 64, 128), "o_proj");
  // q | k | v fused: whole blocks stack as blocks.
  const LinearWeight k = f.loader.load(p + "k_proj", 64, 64), v = f.loader.load(p + "v_proj", 64, 64);
  const LinearWeight parts[] = {q, k, v};
  const LinearWeight qkv = f.loader.stack_rows(parts);
  EXPECT_EQ(qkv.scale_block_rows, 32);
  EXPECT_EQ(qkv.out_features, 256);
  for (int64_t r = 0; r < 256; ++r)
    for (int64_t c = 0; c < 64; ++c) {
      const LinearWeight& part = r < 128 ? q : r < 192 ? k : v;
      const int64_t pr = r < 128 ? r : r < 192 ? r - 128 : r - 192;
      ASSERT_EQ(element(qkv, r, c), element(part, pr, c)) << r << "," << c;
    }
  // Rows picked across blocks (as gated attention splits q_proj) keep their own scales.
  const LinearWeight picked = f.loader.select_rows(q, {127, 0, 33, 64});
  EXPECT_EQ(picked.scale_block_rows, 1);
  for (int64_t c = 0; c < 64; ++c) {
    EXPECT_EQ(element(picked, 0, c), element(q, 127, c));
    EXPECT_EQ(element(picked, 2, c), element(q, 33, c));
  }
  // The tied embedding is not a projection: it stays f32, and asking for it as a linear gives a dense handle.
  EXPECT_EQ(f.loader.load("model.embed_tokens", 512, 64).format, LinearWeight::Format::kDense);
}

TEST(LinearLoader, CompressedTensorsChannelAndTensorScales) {
  Fixture f("qwen3_moe_fp8_ct");
  ASSERT_EQ(f.config.quantization.method, loader::QuantMethod::kCompressedTensors);
  const std::string p = "model.layers.1.";
  const LinearWeight gate = f.loader.load(p + "mlp.experts.3.gate_proj", 32, 64);
  EXPECT_EQ(gate.format, LinearWeight::Format::kFp8);
  EXPECT_EQ(gate.scale_block_rows, 1);  // per channel, bf16 scales read as f32
  EXPECT_EQ(gate.scale_block_cols, 64);
  expect_equals_twin(gate, f.twin_of(p + "mlp.experts.3.gate_proj", 32, 64), "expert gate_proj");
  const LinearWeight down = f.loader.load(p + "mlp.experts.7.down_proj", 64, 32);
  expect_equals_twin(down, f.twin_of(p + "mlp.experts.7.down_proj", 64, 32), "expert down_proj");
  const LinearWeight o = f.loader.load(p + "self_attn.o_proj", 64, 128);
  EXPECT_EQ(o.scale_block_rows, 64);  // one scale for the tensor
  EXPECT_EQ(o.scale_block_cols, 128);
  expect_equals_twin(o, f.twin_of(p + "self_attn.o_proj", 64, 128), "o_proj");
  // The router is in the ignore list: stored f32, loaded dense.
  EXPECT_EQ(f.loader.load(p + "mlp.gate", 8, 64).format, LinearWeight::Format::kDense);
  // A per-channel and a per-tensor weight fused: scales become per row.
  const LinearWeight q = f.loader.load(p + "self_attn.q_proj", 128, 64);
  const LinearWeight parts[] = {gate, q};
  const LinearWeight mixed = f.loader.stack_rows(parts);
  EXPECT_EQ(mixed.scale_block_rows, 1);
  for (int64_t c = 0; c < 64; ++c) EXPECT_EQ(element(mixed, 40, c), element(q, 8, c));
}

TEST(LinearLoader, QuantizesOnLoadPerChannel) {
  loader::QuantizationConfig quantization;
  quantization.fp8_on_load = true;
  auto weights = loader::WeightSource::checkpoint(fixture("qwen3"));
  std::vector<Buffer> owned;
  LinearLoader loader(weights, quantization, owned);
  const Tensor stored = weights.require("model.layers.0.mlp.down_proj.weight", {64, 128}, DType::kF32);
  const LinearWeight w = loader.load("model.layers.0.mlp.down_proj", 64, 128);
  ASSERT_EQ(w.format, LinearWeight::Format::kFp8);
  EXPECT_EQ(w.scale_block_rows, 1);
  for (int64_t r = 0; r < 64; ++r) {
    float amax = 0;
    for (int64_t c = 0; c < 128; ++c) amax = std::max(amax, std::fabs(stored.data_as<float>()[r * 128 + c]));
    EXPECT_FLOAT_EQ(w.scales.data_as<float>()[r], amax / kFp8E4M3Max);
    for (int64_t c = 0; c < 128; ++c) {
      // E4M3 keeps 3 mantissa bits: the rounding error is at most 2^-4 of the value, or half a subnormal step.
      const float x = stored.data_as<float>()[r * 128 + c], y = element(w, r, c);
      EXPECT_LE(std::fabs(x - y), std::max(std::fabs(x) / 16, std::ldexp(1.0f, -10) * w.scales.data_as<float>()[r]))
          << r << "," << c;
    }
  }
  // Routers and the LM head are not quantizable.
  EXPECT_EQ(loader.load("model.layers.0.mlp.down_proj", 64, 128, /*quantizable=*/false).format,
            LinearWeight::Format::kDense);
}

TEST(LinearLoader, DummyWeightsOfAnFp8ConfigTakeItsBlocks) {
  loader::QuantizationConfig quantization;
  quantization.method = loader::QuantMethod::kFp8;
  quantization.block_rows = quantization.block_cols = 128;
  auto weights = loader::WeightSource::dummy(3, DType::kBF16);
  auto reference = loader::WeightSource::dummy(3, DType::kBF16);  // same seed: the same values before quantizing
  std::vector<Buffer> owned;
  LinearLoader loader(weights, quantization, owned);
  const LinearWeight w = loader.load("model.layers.0.mlp.up_proj", 300, 256);
  ASSERT_EQ(w.format, LinearWeight::Format::kFp8);
  EXPECT_EQ(w.scale_block_rows, 128);
  EXPECT_EQ(w.scale_block_cols, 128);
  EXPECT_EQ(w.scales.dim(0), 3);  // 300 rows: two whole blocks and a partial one
  EXPECT_EQ(w.scales.dim(1), 2);
  EXPECT_EQ(weights.bytes_loaded(), 300u * 256 + 6 * sizeof(float));  // counted as stored, not as the bf16 source
  const Tensor values = reference.require("model.layers.0.mlp.up_proj.weight", {300, 256});
  for (int64_t r = 0; r < 300; ++r)
    for (int64_t c = 0; c < 256; ++c) {
      const float x = bf16_to_f32(values.data_as<uint16_t>()[r * 256 + c]), y = element(w, r, c);
      const float scale = w.scales.data_as<float>()[(r / 128) * 2 + c / 128];
      ASSERT_LE(std::fabs(x - y), std::max(std::fabs(x) / 16, std::ldexp(1.0f, -10) * scale)) << r << "," << c;
    }
}

TEST(LinearLoader, RefusesAShapeTheConfigDoesNotGive) {
  auto weights = loader::WeightSource::checkpoint(fixture("qwen3_fp8"));
  loader::QuantizationConfig quantization;
  std::vector<Buffer> owned;
  LinearLoader loader(weights, quantization, owned);
  try {
    loader.load("model.layers.0.self_attn.q_proj", 64, 64);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("has shape [128, 64], expected [64, 64]"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace rs::model
