#include "memory/kv_footprint.h"

#include <gtest/gtest.h>

#include <vector>

namespace rs::memory {
namespace {

// gpt-oss-20b (configs/gpt-oss-20b): 24 layers alternating window 128 / full, 8 KV heads of 64 dims, bf16.
TEST(KvFootprint, GptOss20bAt8kContext) {
  std::vector<int32_t> windows;
  for (int layer = 0; layer < 24; ++layer) windows.push_back(layer % 2 == 0 ? 128 : 0);
  KvPoolConfig config{.page_size = 16,
                      .num_kv_heads = 8,
                      .head_dim = 64,
                      .dtype = DType::kBF16,
                      .groups = group_layers_by_window(windows)};
  const KvFootprint footprint = request_kv_footprint(config, 8192);
  // Full group: 12 layers x 2 (K, V) x 8 heads x 64 x 2 bytes = 24 KiB per token -> 192 MiB for 8192 tokens.
  // Window group: (128/16 + 1) pages x 16 tokens x 24 KiB = 3.375 MiB.
  EXPECT_EQ(footprint.keep_all_bytes, 384ull << 20);
  EXPECT_EQ(footprint.windowed_bytes, (192ull << 20) + 9ull * 16 * 24 * 1024);
}

TEST(KvFootprint, FullAttentionModelKeepsEverything) {
  std::vector<int32_t> windows(4, 0);
  KvPoolConfig config{.page_size = 16,
                      .num_kv_heads = 2,
                      .head_dim = 32,
                      .dtype = DType::kF32,
                      .groups = group_layers_by_window(windows)};
  const KvFootprint footprint = request_kv_footprint(config, 100);
  EXPECT_EQ(footprint.windowed_bytes, footprint.keep_all_bytes);
  EXPECT_EQ(footprint.keep_all_bytes, 7ull * 16 * 4 * 2 * 2 * 32 * 4);
}

}  // namespace
}  // namespace rs::memory
