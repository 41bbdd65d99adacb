// ggml's quantized blocks as affine integer groups: every type radixserve reads stores, per group of g consecutive
// elements of a row, integer codes q and a scale and offset with w = scale * q + bias (Q4_K's d*sc and -dmin*m, Q8_0's
// d and -128 d over q + 128, ...). Products of an f16 and a code of at most 8 bits are exact in f32, so this form
// reproduces ggml's dequantize_row_* bit for bit, and the loader serves it as LinearWeight::kAffine.
#pragma once

#include <cstdint>
#include <optional>

#include "loader/gguf/gguf_file.h"

namespace rs::loader::gguf {

struct AffineLayout {
  int bits;       // 4 (codes 0..15) or 8 (5- and 6-bit codes widened to a byte; Q8_0's int8 + 128)
  int64_t group;  // elements per (scale, bias) pair
};

// The layout a quantized type decodes to, or nullopt for float and unsupported types.
std::optional<AffineLayout> affine_layout(GgmlType type);

// Decodes `rows` rows of `in` elements of `type` from `data` into codes (bits-bit, packed little-endian along the row:
// in * bits / 8 bytes per row) and f32 scales and biases ([rows, in / group] each).
void decode_affine(GgmlType type, const uint8_t* data, int64_t rows, int64_t in, uint8_t* codes, float* scales,
                   float* biases);

// `count` elements of any readable type (float or quantized) as f32, exactly as ggml dequantizes them.
void decode_f32(GgmlType type, const uint8_t* data, int64_t count, float* out);

}  // namespace rs::loader::gguf
