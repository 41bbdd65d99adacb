// WeightSource::sharded: each rank's tensors are the right block of the whole (rows, KV heads, columns), biases of
// row-parallel projections on rank 0 alone, the rest whole; checkpoints and dummy values alike.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "loader/weight_source.h"

namespace rs::loader {
namespace {

constexpr int64_t kHidden = 8, kHeadDim = 4;

// Element (i) of a bf16 tensor as a float.
float at(const Tensor& t, int64_t i) { return bf16_to_f32(t.data_as<uint16_t>()[i]); }

WeightSource::Shard shard(int32_t rank, int32_t size, int32_t kv_heads) { return {rank, size, kv_heads}; }

TEST(WeightSourceShard, RowsAreTheRanksBlock) {
  WeightSource whole = WeightSource::dummy(7, DType::kBF16);
  const Tensor q = whole.require("model.layers.0.self_attn.q_proj.weight", {4 * kHeadDim, kHidden});
  for (int32_t rank = 0; rank < 2; ++rank) {
    WeightSource part = whole.sharded(shard(rank, 2, 2));
    const Tensor q_r = part.require("model.layers.0.self_attn.q_proj.weight", {2 * kHeadDim, kHidden});
    for (int64_t i = 0; i < 2 * kHeadDim * kHidden; ++i)
      ASSERT_EQ(at(q_r, i), at(q, rank * 2 * kHeadDim * kHidden + i));
    EXPECT_EQ(part.bytes_loaded(), static_cast<size_t>(2 * kHeadDim * kHidden * 2));  // the shard, not the whole
  }
}

TEST(WeightSourceShard, KvHeadsSplitOrReplicated) {
  WeightSource whole = WeightSource::dummy(7, DType::kBF16);
  const Tensor k = whole.require("m.k_proj.weight", {2 * kHeadDim, kHidden});
  // Four ranks over two KV heads: ranks 0, 1 read head 0 and ranks 2, 3 head 1.
  for (int32_t rank = 0; rank < 4; ++rank) {
    WeightSource part = whole.sharded(shard(rank, 4, 2));
    const Tensor k_r = part.require("m.k_proj.weight", {kHeadDim, kHidden});
    const int64_t head = rank / 2;
    for (int64_t i = 0; i < kHeadDim * kHidden; ++i) ASSERT_EQ(at(k_r, i), at(k, head * kHeadDim * kHidden + i));
  }
  // Two ranks over two heads: one each.
  WeightSource part = whole.sharded(shard(1, 2, 2));
  const Tensor k_1 = part.require("m.k_proj.weight", {kHeadDim, kHidden});
  EXPECT_EQ(at(k_1, 0), at(k, kHeadDim * kHidden));
}

TEST(WeightSourceShard, ColumnsOfRowParallelProjectionsAndTheirBiases) {
  WeightSource whole = WeightSource::dummy(7, DType::kBF16);
  const Tensor o = whole.require("m.o_proj.weight", {kHidden, 4 * kHeadDim});
  for (int32_t rank = 0; rank < 2; ++rank) {
    WeightSource part = whole.sharded(shard(rank, 2, 2));
    const Tensor o_r = part.require("m.o_proj.weight", {kHidden, 2 * kHeadDim});
    for (int64_t row = 0; row < kHidden; ++row)
      for (int64_t col = 0; col < 2 * kHeadDim; ++col)
        ASSERT_EQ(at(o_r, row * 2 * kHeadDim + col), at(o, row * 4 * kHeadDim + rank * 2 * kHeadDim + col));
    // Biases are zeros in dummy sources: a checkpoint's would be rank 0's alone; check the shape and the zeros.
    const Tensor bias = part.require("m.down_proj.bias", {kHidden});
    for (int64_t i = 0; i < kHidden; ++i) EXPECT_EQ(at(bias, i), 0.0f);
  }
}

TEST(WeightSourceShard, StackedExpertsAlongTheirOwnAxes) {
  WeightSource whole = WeightSource::dummy(7, DType::kBF16);
  // mlx_lm's switch_mlp stacks [E, out, in]: gate/up rows are axis 1, down columns axis 2.
  const Tensor gate = whole.require("m.mlp.switch_mlp.gate_proj.weight", {3, 8, kHidden});
  const Tensor down = whole.require("m.mlp.switch_mlp.down_proj.weight", {3, kHidden, 8});
  // gpt-oss's gate_up [E, H, 2I]: the last axis (gate and up interleaved, so a block keeps its pairs).
  const Tensor gate_up = whole.require("m.mlp.experts.gate_up_proj", {3, kHidden, 8});
  WeightSource part = whole.sharded(shard(1, 2, 2));
  WeightSource::Shard gpt_oss = shard(1, 2, 2);
  gpt_oss.gpt_oss_experts = true;
  const Tensor gate_1 = part.require("m.mlp.switch_mlp.gate_proj.weight", {3, 4, kHidden});
  const Tensor down_1 = part.require("m.mlp.switch_mlp.down_proj.weight", {3, kHidden, 4});
  WeightSource gpt_oss_part = whole.sharded(gpt_oss);  // owns the shard it hands out
  const Tensor gate_up_1 = gpt_oss_part.require("m.mlp.experts.gate_up_proj", {3, kHidden, 4});
  for (int64_t e = 0; e < 3; ++e)
    for (int64_t i = 0; i < 4; ++i)
      for (int64_t j = 0; j < kHidden; ++j) {
        ASSERT_EQ(at(gate_1, (e * 4 + i) * kHidden + j), at(gate, (e * 8 + 4 + i) * kHidden + j));
        ASSERT_EQ(at(down_1, (e * kHidden + j) * 4 + i), at(down, (e * kHidden + j) * 8 + 4 + i));
        ASSERT_EQ(at(gate_up_1, (e * kHidden + j) * 4 + i), at(gate_up, (e * kHidden + j) * 8 + 4 + i));
      }
}

TEST(WeightSourceShard, Qwen35FusedExpertsSplitEachHalf) {
  // gate_up [E, 2I, H]: gate rows 0-7, up rows 8-15; rank 1 of 2 reads gate rows 4-7 and up rows 12-15.
  WeightSource whole = WeightSource::dummy(7, DType::kBF16);
  const Tensor gate_up = whole.require("m.mlp.experts.gate_up_proj", {2, 16, kHidden});
  WeightSource source = whole.sharded(shard(1, 2, 2));  // owns the shard it hands out
  const Tensor part = source.require("m.mlp.experts.gate_up_proj", {2, 8, kHidden});
  const int64_t rows[] = {4, 5, 6, 7, 12, 13, 14, 15};
  for (int64_t e = 0; e < 2; ++e)
    for (int64_t r = 0; r < 8; ++r)
      for (int64_t j = 0; j < kHidden; ++j)
        ASSERT_EQ(at(part, (e * 8 + r) * kHidden + j), at(gate_up, (e * 16 + rows[r]) * kHidden + j));
}

TEST(WeightSourceShard, IntegerScalesFollowTheirCodesAndGroupsMustSplit) {
  WeightSource whole = WeightSource::dummy(7, DType::kBF16);
  const Tensor scales = whole.require("m.o_proj.scales", {kHidden, 4});  // 4 groups of inputs
  WeightSource part = whole.sharded(shard(1, 2, 2));
  const Tensor scales_1 = part.require("m.o_proj.scales", {kHidden, 2});  // columns, as o_proj.weight's
  for (int64_t row = 0; row < kHidden; ++row)
    for (int64_t g = 0; g < 2; ++g) ASSERT_EQ(at(scales_1, row * 2 + g), at(scales, row * 4 + 2 + g));
  // FP8 block scales follow their weight; a per-channel scale under a column cut stays whole (dummy: as asked).
  const Tensor blocks = whole.require("m.q_proj.weight_scale_inv", {4, 2});
  const Tensor blocks_1 = part.require("m.q_proj.weight_scale_inv", {2, 2});
  for (int64_t i = 0; i < 4; ++i) ASSERT_EQ(at(blocks_1, i), at(blocks, 4 + i));
  EXPECT_EQ(part.require("m.o_proj.weight_scale", {kHidden, 1}).dim(0), kHidden);
}

TEST(WeightSourceShard, AwqAndGptqTensorsAreInputMajor) {
  WeightSource whole = WeightSource::dummy(7, DType::kBF16);
  WeightSource::Shard s = shard(1, 2, 2);
  s.in_major = true;
  WeightSource part = whole.sharded(s);
  // q_proj's rows (outputs) are the last axis of qweight [in, out/8] and scales [groups, out].
  const Tensor scales = whole.require("m.q_proj.scales", {2, 16});
  const Tensor scales_1 = part.require("m.q_proj.scales", {2, 8});
  for (int64_t g = 0; g < 2; ++g)
    for (int64_t o = 0; o < 8; ++o) ASSERT_EQ(at(scales_1, g * 8 + o), at(scales, g * 16 + 8 + o));
  // o_proj's columns (inputs) are their first axis.
  const Tensor o_scales = whole.require("m.o_proj.scales", {4, 16});
  const Tensor o_scales_1 = part.require("m.o_proj.scales", {2, 16});
  for (int64_t i = 0; i < 2 * 16; ++i) ASSERT_EQ(at(o_scales_1, i), at(o_scales, 2 * 16 + i));
}

TEST(WeightSourceShard, GptqGroupIndexRenumberedOrRefusedForActOrder) {
  const auto dir = std::filesystem::temp_directory_path() / "rs_shard_g_idx";
  std::filesystem::create_directories(dir);
  // A checkpoint of two g_idx tensors over 8 inputs in groups of 2: in order, and act-order (permuted).
  const std::vector<int32_t> ordered = {0, 0, 1, 1, 2, 2, 3, 3}, act_order = {3, 0, 2, 1, 0, 3, 1, 2};
  {
    std::string header = R"({"a.o_proj.g_idx":{"dtype":"I32","shape":[8],"data_offsets":[0,32]},)"
                         R"("b.o_proj.g_idx":{"dtype":"I32","shape":[8],"data_offsets":[32,64]}})";
    while (header.size() % 8) header += ' ';
    std::ofstream out(dir / "model.safetensors", std::ios::binary);
    const uint64_t size = header.size();
    out.write(reinterpret_cast<const char*>(&size), 8);
    out << header;
    out.write(reinterpret_cast<const char*>(ordered.data()), 32);
    out.write(reinterpret_cast<const char*>(act_order.data()), 32);
  }
  WeightSource whole = WeightSource::checkpoint(dir);
  WeightSource::Shard s = shard(1, 2, 2);
  s.in_major = true;
  WeightSource part = whole.sharded(s);
  const Tensor g_1 = part.require("a.o_proj.g_idx", {4}, DType::kI32);
  EXPECT_EQ(std::vector<int32_t>(g_1.data_as<int32_t>(), g_1.data_as<int32_t>() + 4),
            (std::vector<int32_t>{0, 0, 1, 1}));
  EXPECT_THROW(part.require("b.o_proj.g_idx", {4}, DType::kI32), Error);
  std::filesystem::remove_all(dir);
}

TEST(WeightSourceShard, GatedDeltaNetQkvSections) {
  // q | k | v sections of 4, 4 and 8 channels: rank 1 of 2 reads channels 2-3, 6-7 and 12-15.
  WeightSource whole = WeightSource::dummy(7, DType::kBF16);
  const Tensor conv = whole.require("m.linear_attn.conv1d.weight", {16, 1, 3});
  WeightSource::Shard s = shard(1, 2, 2);
  s.linear_key_dim = 4;
  s.linear_value_dim = 8;
  WeightSource part = whole.sharded(s);
  const Tensor conv_1 = part.require("m.linear_attn.conv1d.weight", {8, 1, 3});
  const int64_t channels[] = {2, 3, 6, 7, 12, 13, 14, 15};
  for (int64_t c = 0; c < 8; ++c)
    for (int64_t k = 0; k < 3; ++k) ASSERT_EQ(at(conv_1, c * 3 + k), at(conv, channels[c] * 3 + k));
}

TEST(WeightSourceShard, OtherTensorsWholeAndOneRankIsTheWhole) {
  WeightSource whole = WeightSource::dummy(7, DType::kBF16);
  const Tensor router = whole.require("model.layers.0.mlp.gate.weight", {16, kHidden});
  WeightSource part = whole.sharded(shard(1, 2, 2));
  const Tensor router_1 = part.require("model.layers.0.mlp.gate.weight", {16, kHidden});
  for (int64_t i = 0; i < 16 * kHidden; ++i) ASSERT_EQ(at(router_1, i), at(router, i));
  // The embedding table is split by vocabulary, as the LM head.
  const Tensor embed = whole.require("model.embed_tokens.weight", {16, kHidden});
  const Tensor embed_1 = part.require("model.embed_tokens.weight", {8, kHidden});
  for (int64_t i = 0; i < 8 * kHidden; ++i) ASSERT_EQ(at(embed_1, i), at(embed, 8 * kHidden + i));
  WeightSource single = whole.sharded(shard(0, 1, 2));
  const Tensor q = single.require("m.q_proj.weight", {4 * kHeadDim, kHidden});
  EXPECT_EQ(q.dim(0), 4 * kHeadDim);
  EXPECT_THROW(whole.sharded(shard(0, 3, 2)), Error);  // 2 KV heads over 3 ranks
}

}  // namespace
}  // namespace rs::loader
