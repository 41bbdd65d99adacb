// LinearLoader against the committed FP8 fixtures (tools/make_fp8_fixtures.py): every weight it hands out, decoded by
// the format's rule (code value x block scale, rounded once to f32), equals the fixture's independently dequantized
// f32 twin; fused and row-selected weights keep that property; quantization on load stays within FP8's rounding.
#include "model/linear_loader.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <numeric>
#include <tuple>

#include "base/error.h"
#include "loader/hf_config.h"

namespace rs::model {
namespace {

namespace fs = std::filesystem;

fs::path fixture(const std::string& name) { return fs::path(RS_SOURCE_DIR) / "tests/data/models" / name; }

float element(const LinearWeight& w, int64_t row, int64_t col) {
  if (w.format == LinearWeight::Format::kAffine) {
    const int64_t bit = col * w.bits, row_bytes = w.in_features * w.bits / 8;
    const uint32_t q = (w.weight.data_as<uint8_t>()[row * row_bytes + (bit >> 3)] >> (bit & 7)) & ((1u << w.bits) - 1);
    const float* pair =
        w.scales.data_as<float>() + (row * (w.in_features / w.scale_block_cols) + col / w.scale_block_cols) * 2;
    return pair[0] * static_cast<float>(q) + pair[1];
  }
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

// Integer fixtures (tools/make_int_fixtures.py): every format's unpacking (MLX words, AWQ's interleaved nibbles, GPTQ's
// columns and v1 zero points) gives the twin's values exactly.
TEST(LinearLoader, IntegerFormatsMatchTheDequantizedTwin) {
  for (const char* name : {"qwen3_mlx4", "qwen3_awq", "qwen3_gptq", "qwen3_gptq8"}) {
    Fixture f(name);
    ASSERT_TRUE(f.config.quantization.is_integer()) << name;
    for (int layer = 0; layer < 3; ++layer) {
      const std::string p = "model.layers." + std::to_string(layer) + ".";
      for (const auto& [module, out, in] : {std::tuple{"self_attn.q_proj", 128, 64},
                                            {"self_attn.k_proj", 64, 64},
                                            {"self_attn.o_proj", 64, 128},
                                            {"mlp.up_proj", 128, 64},
                                            {"mlp.down_proj", 64, 128}}) {
        const LinearWeight w = f.loader.load(p + module, out, in);
        expect_equals_twin(w, f.twin_of(p + module, out, in), std::string(name) + " " + p + module);
      }
    }
  }
  // MLX: the override gives layer 1's down_proj 8 bits in groups of 64; layer 2's o_proj is stored unquantized.
  Fixture mlx("qwen3_mlx4");
  const LinearWeight down = mlx.loader.load("model.layers.1.mlp.down_proj", 64, 128);
  EXPECT_EQ(down.bits, 8);
  EXPECT_EQ(down.scale_block_cols, 64);
  EXPECT_EQ(mlx.loader.load("model.layers.2.self_attn.o_proj", 64, 128).format, LinearWeight::Format::kDense);
  // The quantized embedding stays codes (lookups and the tied head read them).
  const LinearWeight table = mlx.loader.embedding("model.embed_tokens", 512, 64);
  EXPECT_EQ(table.format, LinearWeight::Format::kAffine);
  expect_equals_twin(table, mlx.twin_of("model.embed_tokens", 512, 64), "embed_tokens");
}

// GPTQ act-order: columns sorted into contiguous groups, input_order naming each column's input; q|k|v share one
// order (one input) and stay integer when fused; the exact f32 form puts every column back.
TEST(LinearLoader, GptqActOrderKeepsGroupsByReorderingInputs) {
  Fixture f("qwen3_gptq_actorder");
  const std::string p = "model.layers.1.self_attn.";
  const LinearWeight q = f.loader.load(p + "q_proj", 128, 64), k = f.loader.load(p + "k_proj", 64, 64);
  const LinearWeight o = f.loader.load(p + "o_proj", 64, 128);
  ASSERT_EQ(q.input_order.numel(), 64);
  ASSERT_EQ(o.input_order.numel(), 128);
  std::vector<Buffer> owned;
  for (const auto& [w, module] : {std::pair{q, "q_proj"}, {k, "k_proj"}, {o, "o_proj"}}) {
    const Tensor exact = dequantize_to_f32(w, owned);
    expect_equals_twin(LinearWeight{LinearWeight::Format::kDense, exact, Tensor(), w.out_features, w.in_features},
                       f.twin_of(p + module, w.out_features, w.in_features), module);
  }
  const LinearWeight parts[] = {q, k};
  const LinearWeight qk = f.loader.stack_rows(parts);
  EXPECT_EQ(qk.format, LinearWeight::Format::kAffine);
  EXPECT_EQ(qk.input_order.data(), q.input_order.data());
  // Different orders (o_proj's input is another tensor) cannot share columns: fused as exact f32.
  const LinearWeight gate = f.loader.load("model.layers.1.mlp.gate_proj", 128, 64);
  const LinearWeight mixed_parts[] = {q, gate};
  EXPECT_EQ(f.loader.stack_rows(mixed_parts).format, LinearWeight::Format::kDense);
}

TEST(LinearLoader, StackedMlxExpertsAndMixedFusion) {
  Fixture f("qwen3_moe_mlx4");
  const std::string p = "model.layers.1.mlp.";
  for (int64_t e : {0, 5, 7}) {
    const auto gate = f.loader.load_expert(p + "switch_mlp.gate_proj", e, 8, 32, 64);
    ASSERT_TRUE(gate.has_value());
    expect_equals_twin(*gate, f.twin_of(p + "experts." + std::to_string(e) + ".gate_proj", 32, 64), "expert gate");
    const auto down = f.loader.load_expert(p + "switch_mlp.down_proj", e, 8, 64, 32);
    expect_equals_twin(*down, f.twin_of(p + "experts." + std::to_string(e) + ".down_proj", 64, 32), "expert down");
  }
  EXPECT_FALSE(f.loader.load_expert(p + "switch_mlp.no_such_proj", 0, 8, 32, 64).has_value());
  // The 8-bit router fused with a 4-bit expert (different bits): both widen exactly to 8-bit codes.
  const LinearWeight router = f.loader.load(p + "gate", 8, 64);
  EXPECT_EQ(router.bits, 8);
  const LinearWeight gate = *f.loader.load_expert(p + "switch_mlp.gate_proj", 2, 8, 32, 64);
  const LinearWeight parts[] = {gate, router};
  const LinearWeight mixed = f.loader.stack_rows(parts);
  EXPECT_EQ(mixed.format, LinearWeight::Format::kAffine);
  EXPECT_EQ(mixed.bits, 8);
  EXPECT_EQ(mixed.scale_block_cols, std::gcd(gate.scale_block_cols, router.scale_block_cols));
  for (int64_t c = 0; c < 64; ++c) {
    EXPECT_EQ(element(mixed, 3, c), element(gate, 3, c));
    EXPECT_EQ(element(mixed, 32 + 5, c), element(router, 5, c));
  }
  // Same storage stacks as codes; selected rows keep their groups.
  const LinearWeight up = *f.loader.load_expert(p + "switch_mlp.up_proj", 2, 8, 32, 64);
  const LinearWeight same[] = {gate, up};
  const LinearWeight fused = f.loader.stack_rows(same);
  ASSERT_EQ(fused.format, LinearWeight::Format::kAffine);
  const LinearWeight picked = f.loader.select_rows(fused, {63, 1});
  for (int64_t c = 0; c < 64; ++c) {
    EXPECT_EQ(element(fused, 40, c), element(up, 8, c));
    EXPECT_EQ(element(picked, 0, c), element(up, 31, c));
    EXPECT_EQ(element(picked, 1, c), element(gate, 1, c));
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
