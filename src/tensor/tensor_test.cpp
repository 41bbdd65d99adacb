#include "tensor/tensor.h"

#include <gtest/gtest.h>

#include "tensor/buffer.h"

namespace rs {

TEST(Tensor, ViewsAndSlices) {
  Buffer buffer = Buffer::host(24 * sizeof(float));
  Tensor t = buffer.tensor(DType::kF32, {4, 6});
  for (int i = 0; i < 24; ++i) t.data_as<float>()[i] = static_cast<float>(i);
  EXPECT_EQ(t.rows(), 4);
  Tensor rows = t.slice_rows(1, 3);
  EXPECT_EQ(rows.dim(0), 2);
  EXPECT_EQ(rows.data_as<float>()[0], 6.0f);
  Tensor row = t.select(2);
  EXPECT_EQ(row.ndim(), 1);
  EXPECT_EQ(row.data_as<float>()[0], 12.0f);
  EXPECT_EQ(t.view({2, 3, 4}).dim(-1), 4);
  EXPECT_THROW(t.view({5, 5}), Error);
  EXPECT_THROW(t.slice_rows(3, 5), Error);
}

}  // namespace rs
