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

TEST(DType, Fp8E4M3DecodesEveryCode) {
  EXPECT_EQ(fp8_e4m3_to_f32(0x00), 0.0f);
  EXPECT_EQ(fp8_e4m3_to_f32(0x38), 1.0f);                  // exponent 7 = bias
  EXPECT_EQ(fp8_e4m3_to_f32(0x7e), 448.0f);                // the largest finite value
  EXPECT_EQ(fp8_e4m3_to_f32(0x01), std::ldexp(1.0f, -9));  // the smallest subnormal
  EXPECT_EQ(fp8_e4m3_to_f32(0x08), std::ldexp(1.0f, -6));  // the smallest normal
  EXPECT_EQ(fp8_e4m3_to_f32(0xc4), -3.0f);                 // -(1 + 4/8) * 2^1
  EXPECT_TRUE(std::isnan(fp8_e4m3_to_f32(0x7f)));
  EXPECT_TRUE(std::isnan(fp8_e4m3_to_f32(0xff)));
  // Every finite code round-trips through f32.
  for (int code = 0; code < 256; ++code) {
    if ((code & 0x7f) == 0x7f) continue;
    const float v = fp8_e4m3_to_f32(static_cast<uint8_t>(code));
    if (v == 0.0f) continue;  // -0 encodes as 0x80, +0 as 0x00: both fine
    EXPECT_EQ(f32_to_fp8_e4m3(v), code) << code;
  }
}

TEST(DType, Fp8E4M3RoundsToNearestEvenAndSaturates) {
  // Between 1 (0x38) and 1.125 (0x39): the midpoint goes to the even mantissa, just above it goes up.
  EXPECT_EQ(f32_to_fp8_e4m3(1.0625f), 0x38);
  EXPECT_EQ(f32_to_fp8_e4m3(1.0626f), 0x39);
  EXPECT_EQ(f32_to_fp8_e4m3(1.1875f), 0x3a);  // 1.125 | 1.25 midpoint -> even (1.25, mantissa 2)
  // 15.5 lies between 15 (0x57) and 16 (0x58): ties to even steps into the next binade.
  EXPECT_EQ(f32_to_fp8_e4m3(15.5f), 0x58);
  EXPECT_EQ(f32_to_fp8_e4m3(1e6f), 0x7e);
  EXPECT_EQ(f32_to_fp8_e4m3(-1e6f), 0xfe);
  EXPECT_EQ(f32_to_fp8_e4m3(std::ldexp(1.0f, -10)), 0x00);  // half the smallest subnormal: ties to even (zero)
  EXPECT_EQ(f32_to_fp8_e4m3(std::ldexp(3.0f, -11)), 0x01);  // 0.75 of it rounds up
  EXPECT_EQ(f32_to_fp8_e4m3(NAN), 0x7f);
}

}  // namespace rs
