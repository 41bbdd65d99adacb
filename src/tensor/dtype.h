// DType: element types of tensors and their sizes; scalar conversions for bf16/f16/MXFP4.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

namespace rs {

enum class DType : uint8_t {
  kF32,
  kBF16,
  kF16,
  kF64,
  kI64,
  kI32,
  kI16,
  kI8,
  kU64,
  kU32,
  kU16,
  kU8,
  kBool,
  kF8E4M3,
  kF8E5M2,
  kF8E8M0,  // MXFP4 block scales: value 2^(e-127)
};

// Bytes per element.
size_t dtype_size(DType dtype);
std::string_view dtype_name(DType dtype);
// Parses a safetensors dtype string ("F32", "BF16", ...); returns false if unknown.
bool parse_safetensors_dtype(std::string_view name, DType* out);

inline float bf16_to_f32(uint16_t bits) {
  uint32_t word = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &word, sizeof value);
  return value;
}

// Round-to-nearest-even, NaN preserved.
inline uint16_t f32_to_bf16(float value) {
  uint32_t word;
  std::memcpy(&word, &value, sizeof word);
  if ((word & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((word >> 16) | 0x40);
  word += 0x7fffu + ((word >> 16) & 1u);
  return static_cast<uint16_t>(word >> 16);
}

float f16_to_f32(uint16_t bits);
uint16_t f32_to_f16(float value);

// FP8 E4M3 (OCP "e4m3fn", the F8_E4M3 of safetensors and of every FP8 checkpoint): 1 sign, 4 exponent bits (bias 7),
// 3 mantissa bits, no infinities; 0x7f / 0xff are NaN, the largest finite value is 448. Decoding is exact in f32.
float fp8_e4m3_to_f32(uint8_t code);
// Round-to-nearest-even; values beyond +-448 saturate to +-448 (as every FP8 quantizer clamps first), NaN stays NaN.
uint8_t f32_to_fp8_e4m3(float value);
constexpr float kFp8E4M3Max = 448.0f;

// FP4 E2M1 code (low 4 bits) -> value: [0, .5, 1, 1.5, 2, 3, 4, 6] with bit 3 as the sign.
inline float fp4_e2m1_to_f32(uint8_t code) {
  static constexpr float kValues[16] = {0.f,  .5f,  1.f,  1.5f,  2.f,  3.f,  4.f,  6.f,
                                        -0.f, -.5f, -1.f, -1.5f, -2.f, -3.f, -4.f, -6.f};
  return kValues[code & 15];
}

}  // namespace rs
