// WeightSource::sharded: each rank's tensors are the right block of the whole (rows, KV heads, columns), biases of
// row-parallel projections on rank 0 alone, the rest whole; checkpoints and dummy values alike.
#include <gtest/gtest.h>

#include "loader/weight_source.h"

namespace rs::loader {
namespace {

constexpr int64_t kHidden = 8, kHeadDim = 4;

// Element (i) of a bf16 tensor as a float.
float at(const Tensor& t, int64_t i) { return bf16_to_f32(t.data_as<uint16_t>()[i]); }

WeightSource::Shard shard(int32_t rank, int32_t size, int32_t kv_heads) { return {rank, size, kv_heads, kHeadDim}; }

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
  EXPECT_THROW(part.require("m.k_proj.weight", {2 * kHeadDim, kHidden}), Error);
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

TEST(WeightSourceShard, OtherTensorsWholeAndOneRankIsTheWhole) {
  WeightSource whole = WeightSource::dummy(7, DType::kBF16);
  const Tensor embed = whole.require("model.embed_tokens.weight", {16, kHidden});
  WeightSource part = whole.sharded(shard(1, 2, 2));
  const Tensor embed_1 = part.require("model.embed_tokens.weight", {16, kHidden});
  for (int64_t i = 0; i < 16 * kHidden; ++i) ASSERT_EQ(at(embed_1, i), at(embed, i));
  WeightSource single = whole.sharded(shard(0, 1, 2));
  const Tensor q = single.require("m.q_proj.weight", {4 * kHeadDim, kHidden});
  EXPECT_EQ(q.dim(0), 4 * kHeadDim);
  EXPECT_THROW(whole.sharded(shard(0, 3, 2)), Error);  // 2 KV heads over 3 ranks
}

}  // namespace
}  // namespace rs::loader
