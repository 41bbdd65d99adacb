#include "loader/gguf/blocks.h"

#include <cstring>

#include "base/error.h"
#include "tensor/dtype.h"

namespace rs::loader::gguf {
namespace {

float half(const uint8_t* p) {
  uint16_t bits;
  std::memcpy(&bits, p, 2);
  return f16_to_f32(bits);
}

// Q4_K / Q5_K: scale and min j (0..7) of a super-block, 6 bits each, from its 12 packed bytes.
void scale_min_k4(int j, const uint8_t* q, int& scale, int& min) {
  if (j < 4) {
    scale = q[j] & 63;
    min = q[j + 4] & 63;
  } else {
    scale = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    min = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// One block: a code per element (code[e]) and a (scale, bias) pair per group of the block.
void decode_block(GgmlType type, const uint8_t* b, uint8_t* code, float* scale, float* bias) {
  switch (type) {
    case GgmlType::kQ4_0:
    case GgmlType::kQ4_1: {
      const bool offset = type == GgmlType::kQ4_1;
      const uint8_t* qs = b + (offset ? 4 : 2);
      for (int j = 0; j < 16; ++j) {
        code[j] = qs[j] & 0xF;
        code[j + 16] = qs[j] >> 4;
      }
      scale[0] = half(b);
      bias[0] = offset ? half(b + 2) : -8.0f * scale[0];
      return;
    }
    case GgmlType::kQ5_0:
    case GgmlType::kQ5_1: {
      const bool offset = type == GgmlType::kQ5_1;
      uint32_t qh;
      std::memcpy(&qh, b + (offset ? 4 : 2), 4);
      const uint8_t* qs = b + (offset ? 8 : 6);
      for (int j = 0; j < 16; ++j) {
        code[j] = static_cast<uint8_t>((qs[j] & 0xF) | (((qh >> j) << 4) & 0x10));
        code[j + 16] = static_cast<uint8_t>((qs[j] >> 4) | ((qh >> (j + 12)) & 0x10));
      }
      scale[0] = half(b);
      bias[0] = offset ? half(b + 2) : -16.0f * scale[0];
      return;
    }
    case GgmlType::kQ8_0: {
      for (int j = 0; j < 32; ++j) code[j] = static_cast<uint8_t>(static_cast<int8_t>(b[2 + j]) + 128);
      scale[0] = half(b);
      bias[0] = -128.0f * scale[0];
      return;
    }
    case GgmlType::kQ4_K:
    case GgmlType::kQ5_K: {
      const bool five = type == GgmlType::kQ5_K;
      const float d = half(b), dmin = half(b + 2);
      const uint8_t* scales = b + 4;
      const uint8_t* qh = b + 16;
      const uint8_t* qs = b + (five ? 48 : 16);
      for (int chunk = 0; chunk < 4; ++chunk) {  // 64 elements: 32 low nibbles, then 32 high nibbles
        for (int half_index = 0; half_index < 2; ++half_index) {
          const int group = 2 * chunk + half_index;
          int sc, m;
          scale_min_k4(group, scales, sc, m);
          scale[group] = d * static_cast<float>(sc);
          bias[group] = -(dmin * static_cast<float>(m));
          const uint8_t* q = qs + 32 * chunk;
          for (int l = 0; l < 32; ++l) {
            int value = half_index ? q[l] >> 4 : q[l] & 0xF;
            if (five && (qh[l] & (1u << group))) value += 16;
            code[32 * group + l] = static_cast<uint8_t>(value);
          }
        }
      }
      return;
    }
    case GgmlType::kQ2_K: {
      // 16 groups of 16: scale d * (s & 15), bias -dmin * (s >> 4); codes 2 bits, four per byte of qs, the byte of
      // element l of 32-byte half h at bits 2 j for the j-th pair of groups.
      const uint8_t* sc = b;
      const uint8_t* qs = b + 16;
      const float d = half(b + 80), dmin = half(b + 82);
      for (int g = 0; g < 16; ++g) {
        scale[g] = d * static_cast<float>(sc[g] & 0xF);
        bias[g] = -(dmin * static_cast<float>(sc[g] >> 4));
      }
      for (int n = 0; n < 2; ++n)  // 128 elements per 32 bytes of qs
        for (int j = 0; j < 4; ++j)
          for (int l = 0; l < 32; ++l) code[128 * n + 32 * j + l] = (qs[32 * n + l] >> (2 * j)) & 3;
      return;
    }
    case GgmlType::kQ3_K: {
      // 16 groups of 16: scale d * (s - 32) with s 6 bits (4 low bits from bytes 0-7, 2 high from bytes 8-11), code
      // = low 2 bits | high bit << 2, value (code - 4) * scale.
      const uint8_t* hmask = b;
      const uint8_t* qs = b + 32;
      const uint8_t* packed = b + 96;
      const float d = half(b + 108);
      for (int g = 0; g < 16; ++g) {
        const int low = g < 8 ? packed[g] & 0xF : packed[g - 8] >> 4;
        const int high = (packed[8 + g % 4] >> (2 * (g / 4))) & 3;
        scale[g] = d * static_cast<float>((low | (high << 4)) - 32);
        bias[g] = -4.0f * scale[g];
      }
      for (int n = 0; n < 2; ++n)
        for (int j = 0; j < 4; ++j)
          for (int l = 0; l < 32; ++l) {
            const int e = 128 * n + 32 * j + l;
            const int high = (hmask[l] >> (4 * n + j)) & 1;
            code[e] = static_cast<uint8_t>(((qs[32 * n + l] >> (2 * j)) & 3) | (high << 2));
          }
      return;
    }
    case GgmlType::kQ6_K: {
      const uint8_t* ql = b;
      const uint8_t* qh = b + 128;
      const auto* sc = reinterpret_cast<const int8_t*>(b + 192);
      const float d = half(b + 208);
      for (int g = 0; g < 16; ++g) {
        scale[g] = d * static_cast<float>(sc[g]);
        bias[g] = -32.0f * scale[g];
      }
      for (int n = 0; n < 2; ++n) {  // 128 elements each: 64 bytes of low nibbles, 32 of high bit pairs
        const uint8_t* lo = ql + 64 * n;
        const uint8_t* hi = qh + 32 * n;
        uint8_t* c = code + 128 * n;
        for (int l = 0; l < 32; ++l) {
          c[l] = static_cast<uint8_t>((lo[l] & 0xF) | (((hi[l] >> 0) & 3) << 4));
          c[l + 32] = static_cast<uint8_t>((lo[l + 32] & 0xF) | (((hi[l] >> 2) & 3) << 4));
          c[l + 64] = static_cast<uint8_t>((lo[l] >> 4) | (((hi[l] >> 4) & 3) << 4));
          c[l + 96] = static_cast<uint8_t>((lo[l + 32] >> 4) | (((hi[l] >> 6) & 3) << 4));
        }
      }
      return;
    }
    default: RS_FAIL("GGUF type {} has no affine decoding", type_name(type));
  }
}

}  // namespace

std::optional<AffineLayout> affine_layout(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_0:
    case GgmlType::kQ4_1:
    case GgmlType::kQ4_K: return AffineLayout{4, 32};
    case GgmlType::kQ5_0:
    case GgmlType::kQ5_1:
    case GgmlType::kQ8_0:
    case GgmlType::kQ5_K: return AffineLayout{8, 32};
    case GgmlType::kQ6_K:
    case GgmlType::kQ3_K: return AffineLayout{8, 16};
    case GgmlType::kQ2_K: return AffineLayout{2, 16};
    default: return std::nullopt;
  }
}

void decode_affine(GgmlType type, const uint8_t* data, int64_t rows, int64_t in, uint8_t* codes, float* scales,
                   float* biases) {
  const auto layout = affine_layout(type);
  RS_CHECK(layout.has_value(), "GGUF type {} has no affine decoding", type_name(type));
  const BlockShape block = block_shape(type);
  RS_CHECK(in % block.elements == 0, "rows of {} elements are not whole {} blocks", in, type_name(type));
  const int64_t blocks = in / block.elements, groups_per_block = block.elements / layout->group;
  const int64_t row_bytes = in * layout->bits / 8, groups = in / layout->group;
  uint8_t code[256];
  float scale[16], bias[16];
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t* row = codes + r * row_bytes;
    if (layout->bits < 8) std::memset(row, 0, row_bytes);
    for (int64_t k = 0; k < blocks; ++k) {
      decode_block(type, data + (r * blocks + k) * block.bytes, code, scale, bias);
      const int64_t first = k * block.elements;
      for (int64_t e = 0; e < block.elements; ++e) {
        const int64_t i = first + e;
        if (layout->bits == 8) {
          row[i] = code[e];
        } else {
          const int64_t bit = i * layout->bits;
          row[bit >> 3] = static_cast<uint8_t>(row[bit >> 3] | (code[e] << (bit & 7)));
        }
      }
      for (int64_t g = 0; g < groups_per_block; ++g) {
        scales[r * groups + k * groups_per_block + g] = scale[g];
        biases[r * groups + k * groups_per_block + g] = bias[g];
      }
    }
  }
}

void decode_f32(GgmlType type, const uint8_t* data, int64_t count, float* out) {
  switch (type) {
    case GgmlType::kF32: std::memcpy(out, data, count * sizeof(float)); return;
    case GgmlType::kF16:
      for (int64_t i = 0; i < count; ++i) out[i] = half(data + 2 * i);
      return;
    case GgmlType::kBF16:
      for (int64_t i = 0; i < count; ++i) {
        uint16_t bits;
        std::memcpy(&bits, data + 2 * i, 2);
        out[i] = bf16_to_f32(bits);
      }
      return;
    default: break;
  }
  const auto layout = affine_layout(type);
  RS_CHECK(layout.has_value(), "GGUF type {} cannot be read", type_name(type));
  const BlockShape block = block_shape(type);
  RS_CHECK(count % block.elements == 0, "{} elements are not whole {} blocks", count, type_name(type));
  uint8_t code[256];
  float scale[16], bias[16];
  for (int64_t k = 0; k < count / block.elements; ++k) {
    decode_block(type, data + k * block.bytes, code, scale, bias);
    for (int64_t e = 0; e < block.elements; ++e)
      out[k * block.elements + e] = scale[e / layout->group] * static_cast<float>(code[e]) + bias[e / layout->group];
  }
}

}  // namespace rs::loader::gguf
