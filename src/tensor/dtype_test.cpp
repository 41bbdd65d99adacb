#include "tensor/dtype.h"

#include <gtest/gtest.h>

#include <cmath>

namespace rs {

TEST(DType, Bf16RoundsToNearestEven) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(bf16_to_f32(0x3f80), 1.0f);
  // 1 + 2^-8 is halfway between two bf16 values; ties go to the even mantissa (1.0).
  EXPECT_EQ(f32_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  EXPECT_EQ(f32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(NAN))));
}

TEST(DType, F16RoundTripsExactValues) {
  for (float v : {0.0f, 1.0f, -2.5f, 65504.0f, 6.103515625e-05f, 5.960464477539063e-08f}) {
    EXPECT_EQ(f16_to_f32(f32_to_f16(v)), v) << v;
  }
  EXPECT_TRUE(std::isinf(f16_to_f32(f32_to_f16(1e6f))));
}

TEST(DType, ParsesSafetensorsNames) {
  DType dtype;
  ASSERT_TRUE(parse_safetensors_dtype("BF16", &dtype));
  EXPECT_EQ(dtype, DType::kBF16);
  EXPECT_EQ(dtype_size(dtype), 2u);
  EXPECT_FALSE(parse_safetensors_dtype("Q4_K", &dtype));
}

TEST(DType, Fp4Table) {
  EXPECT_EQ(fp4_e2m1_to_f32(0x7), 6.0f);
  EXPECT_EQ(fp4_e2m1_to_f32(0xA), -1.0f);
  EXPECT_EQ(fp4_e2m1_to_f32(0x3), 1.5f);
}

}  // namespace rs
