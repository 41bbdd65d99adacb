#include "tensor/dtype.h"

#include <algorithm>
#include <cmath>

namespace rs {
namespace {

struct DTypeInfo {
  DType dtype;
  std::string_view name;  // safetensors spelling
  size_t size;
};

constexpr DTypeInfo kInfos[] = {
    {DType::kF32, "F32", 4},        {DType::kBF16, "BF16", 2},      {DType::kF16, "F16", 2},
    {DType::kF64, "F64", 8},        {DType::kI64, "I64", 8},        {DType::kI32, "I32", 4},
    {DType::kI16, "I16", 2},        {DType::kI8, "I8", 1},          {DType::kU64, "U64", 8},
    {DType::kU32, "U32", 4},        {DType::kU16, "U16", 2},        {DType::kU8, "U8", 1},
    {DType::kBool, "BOOL", 1},      {DType::kF8E4M3, "F8_E4M3", 1}, {DType::kF8E5M2, "F8_E5M2", 1},
    {DType::kF8E8M0, "F8_E8M0", 1},
};

const DTypeInfo& info(DType dtype) {
  for (const auto& entry : kInfos)
    if (entry.dtype == dtype) return entry;
  __builtin_unreachable();
}

}  // namespace

size_t dtype_size(DType dtype) { return info(dtype).size; }
std::string_view dtype_name(DType dtype) { return info(dtype).name; }

bool parse_safetensors_dtype(std::string_view name, DType* out) {
  for (const auto& entry : kInfos) {
    if (entry.name == name) {
      *out = entry.dtype;
      return true;
    }
  }
  return false;
}

float f16_to_f32(uint16_t bits) {
  const uint32_t sign = (bits >> 15) & 1u;
  const uint32_t exponent = (bits >> 10) & 0x1fu;
  const uint32_t mantissa = bits & 0x3ffu;
  float magnitude;
  if (exponent == 0) {
    magnitude = std::ldexp(static_cast<float>(mantissa), -24);
  } else if (exponent == 31) {
    magnitude = mantissa ? NAN : INFINITY;
  } else {
    magnitude = std::ldexp(static_cast<float>(mantissa | 0x400u), static_cast<int>(exponent) - 25);
  }
  return sign ? -magnitude : magnitude;
}

uint16_t f32_to_f16(float value) {
  uint32_t word;
  std::memcpy(&word, &value, sizeof word);
  const uint32_t sign = (word >> 16) & 0x8000u;
  const int32_t exponent = static_cast<int32_t>((word >> 23) & 0xffu) - 127 + 15;
  uint32_t mantissa = word & 0x7fffffu;
  if (((word >> 23) & 0xffu) == 0xffu) return static_cast<uint16_t>(sign | 0x7c00u | (mantissa ? 0x200u : 0u));
  if (exponent >= 31) return static_cast<uint16_t>(sign | 0x7c00u);
  if (exponent <= 0) {
    if (exponent < -10) return static_cast<uint16_t>(sign);
    mantissa |= 0x800000u;
    const uint32_t shift = static_cast<uint32_t>(14 - exponent);
    uint32_t half = mantissa >> shift;
    const uint32_t rest = mantissa & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (half & 1u))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = (static_cast<uint32_t>(exponent) << 10) | (mantissa >> 13);
  const uint32_t rest = mantissa & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;  // may carry into the exponent: correct
  return static_cast<uint16_t>(sign | half);
}

float fp8_e4m3_to_f32(uint8_t code) {
  const int exponent = (code >> 3) & 0xf, mantissa = code & 7;
  if (exponent == 0xf && mantissa == 7) return NAN;
  // Subnormals (exponent 0) are mantissa / 8 * 2^-6; normals (1 + mantissa / 8) * 2^(exponent - 7).
  const float magnitude = exponent == 0 ? std::ldexp(static_cast<float>(mantissa), -9)
                                        : std::ldexp(static_cast<float>(8 + mantissa), exponent - 10);
  return (code & 0x80) ? -magnitude : magnitude;
}

uint8_t f32_to_fp8_e4m3(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  const uint8_t sign = static_cast<uint8_t>((bits >> 24) & 0x80);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return 0x7f;  // NaN
  const float magnitude = std::min(std::fabs(value), kFp8E4M3Max);
  if (magnitude < 0.015625f) {  // below 2^-6: subnormal steps of 2^-9 (code 8, 2^-6, is the smallest normal)
    return static_cast<uint8_t>(sign | static_cast<int>(std::nearbyint(magnitude * 512.0f)));
  }
  std::memcpy(&bits, &magnitude, sizeof bits);
  int exponent = static_cast<int>(bits >> 23) - 127;  // -6 .. 8
  uint32_t mantissa = (bits >> 20) & 7;
  const uint32_t rest = bits & 0xfffffu, half = 0x80000u;
  if (rest > half || (rest == half && (mantissa & 1))) ++mantissa;  // to nearest, ties to even
  if (mantissa == 8) mantissa = 0, ++exponent;
  // magnitude <= 448 = 1.75 * 2^8 cannot round past the largest finite code 0x7e.
  return static_cast<uint8_t>(sign | ((exponent + 7) << 3) | mantissa);
}

}  // namespace rs
