#include "backend/cpu/kernels/gemv_avx2.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "backend/cpu/kernels/gemm_bf16.h"
#include "backend/cpu/kernels/simd.h"
#include "backend/cpu/kernels/vec.h"

namespace rs::cpu {

bool cpu_has_avx2_fma() {
#if defined(__x86_64__)
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
#else
  return false;
#endif
}

bool avx2_kernels_forced() {
  static const bool forced = [] {
    const char* value = std::getenv("RS_CPU_KERNELS");
    return value && std::string_view(value) == "avx2";
  }();
  return forced;
}

bool avx2_gemv_supports(const LinearWeight& w) {
  if (!cpu_has_avx2_fma() || has_bf16_gemm() || !w.packed.empty() || !w.input_order.empty() || w.in_features % 8 != 0)
    return false;
  if (w.format == LinearWeight::Format::kDense) {
#if defined(__AVX512F__)
    if (!avx2_kernels_forced()) return false;  // AVX-512F without BF16 (Skylake-SP, Ice Lake): gemm.cpp's gemv_bf16
#endif
    return w.weight.dtype() == DType::kBF16;
  }
  if (w.format == LinearWeight::Format::kMxfp4) return w.in_features % 32 == 0;
  if (w.format == LinearWeight::Format::kFp8)
    return w.scale_block_rows > 0 && (w.scale_block_cols % 8 == 0 || w.scale_block_cols >= w.in_features);
  if (w.format != LinearWeight::Format::kAffine || (w.bits != 4 && w.bits != 8)) return false;
  const int64_t group = w.scale_block_cols;
  return group > 0 && group % 16 == 0 && w.in_features % group == 0;
}

#if defined(__x86_64__)
namespace {

// kRows rows at a time (independent FMA chains for one token), each with kTokens sums of 8 lanes.
template <int kTokens, int kRows>
RS_TARGET_AVX2 void bf16_rows(const float* x, const uint16_t* w, int64_t in, float* out, int64_t out_stride,
                              int64_t row) {
  __m256 acc[kTokens][kRows];
  for (int t = 0; t < kTokens; ++t)
    for (int r = 0; r < kRows; ++r) acc[t][r] = _mm256_setzero_ps();
  for (int64_t i = 0; i < in; i += 8) {
    __m256 wv[kRows];
    for (int r = 0; r < kRows; ++r) {
      _mm_prefetch(reinterpret_cast<const char*>(w + (row + r) * in + i + 512), _MM_HINT_T0);
      wv[r] = load_bf16x8(w + (row + r) * in + i);
    }
    for (int t = 0; t < kTokens; ++t) {
      const __m256 xv = _mm256_loadu_ps(x + t * in + i);
      for (int r = 0; r < kRows; ++r) acc[t][r] = _mm256_fmadd_ps(wv[r], xv, acc[t][r]);
    }
  }
  for (int t = 0; t < kTokens; ++t)
    for (int r = 0; r < kRows; ++r) out[t * out_stride + row + r] = sum_f32x8(acc[t][r]);
}

// 16 codes of a row starting at input i, widened to f32 in two halves (elements i..i+7, i+8..i+15).
template <int kBits>
RS_TARGET_AVX2 inline void codes16(const uint8_t* row_codes, int64_t i, __m256& lo, __m256& hi) {
  __m128i q;
  if constexpr (kBits == 4) {
    // 8 bytes, element j in the low nibble of byte j / 2 when j is even, the high one when odd.
    const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(row_codes + i / 2));
    const __m128i nibble = _mm_set1_epi8(0x0f);
    q = _mm_unpacklo_epi8(_mm_and_si128(bytes, nibble), _mm_and_si128(_mm_srli_epi16(bytes, 4), nibble));
  } else {
    q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row_codes + i));
  }
  lo = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(q));
  hi = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(q, 8)));
}

// The GEMV's form of codes16: 4-bit codes as the even elements (low nibbles) and the odd ones (high nibbles) of the 16,
// one widening instead of an interleave and two (x comes deinterleaved to match); 8-bit as codes16.
template <int kBits>
RS_TARGET_AVX2 inline void codes16_split(const uint8_t* row_codes, int64_t i, __m256& lo, __m256& hi) {
  if constexpr (kBits == 4) {
    const __m256i bytes = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(row_codes + i / 2)));
    lo = _mm256_cvtepi32_ps(_mm256_and_si256(bytes, _mm256_set1_epi32(0x0f)));
    hi = _mm256_cvtepi32_ps(_mm256_srli_epi32(bytes, 4));
  } else {
    lo = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(row_codes + i))));
    hi = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(row_codes + i + 8))));
  }
}

// x [tokens, in] with each kBlock inputs reordered as their even ones, then their odd ones: the order of the low and
// the high nibbles of kBlock / 2 bytes (codes16_split's 4-bit codes: 16; MXFP4 blocks: 32).
template <int kBlock>
void deinterleave(const float* x, int64_t tokens, int64_t in, float* out) {
  for (int64_t b = 0; b < tokens * in; b += kBlock)
    for (int j = 0; j < kBlock / 2; ++j) out[b + j] = x[b + 2 * j], out[b + kBlock / 2 + j] = x[b + 2 * j + 1];
}

// kRows rows of integer codes; per group the products of codes and x are summed apart (two chains per token and row)
// and then scaled: acc += scale x sum. The biases' part, bias x (sum of x over the group), is added per group from
// x_sums ([kTokens][groups]) in scalar code.
template <int kBits, int kTokens, int kRows>
RS_TARGET_AVX2 void affine_rows(const float* x, const LinearWeight& w, const float* x_sums, float* out,
                                int64_t out_stride, int64_t row) {
  const int64_t in = w.in_features, group = w.scale_block_cols, groups = in / group;
  const int64_t row_bytes = in * kBits / 8;
  const uint8_t* codes = w.weight.data_as<uint8_t>() + row * row_bytes;
  const float* pairs = w.scales.data_as<float>() + row * groups * 2;
  __m256 acc[kTokens][kRows];
  float bias_part[kTokens][kRows] = {};
  for (int t = 0; t < kTokens; ++t)
    for (int r = 0; r < kRows; ++r) acc[t][r] = _mm256_setzero_ps();
  for (int64_t g = 0; g < groups; ++g) {
    __m256 sum_lo[kTokens][kRows], sum_hi[kTokens][kRows];
    for (int t = 0; t < kTokens; ++t)
      for (int r = 0; r < kRows; ++r) sum_lo[t][r] = sum_hi[t][r] = _mm256_setzero_ps();
    for (int64_t i = g * group; i < (g + 1) * group; i += 16) {
      __m256 q_lo[kRows], q_hi[kRows];
      for (int r = 0; r < kRows; ++r) {
        _mm_prefetch(reinterpret_cast<const char*>(codes + r * row_bytes + i * kBits / 8 + 1024), _MM_HINT_T0);
        codes16_split<kBits>(codes + r * row_bytes, i, q_lo[r], q_hi[r]);
      }
      for (int t = 0; t < kTokens; ++t) {
        const __m256 x_lo = _mm256_loadu_ps(x + t * in + i), x_hi = _mm256_loadu_ps(x + t * in + i + 8);
        for (int r = 0; r < kRows; ++r) {
          sum_lo[t][r] = _mm256_fmadd_ps(q_lo[r], x_lo, sum_lo[t][r]);
          sum_hi[t][r] = _mm256_fmadd_ps(q_hi[r], x_hi, sum_hi[t][r]);
        }
      }
    }
    for (int r = 0; r < kRows; ++r) {
      const float scale = pairs[r * groups * 2 + 2 * g], bias = pairs[r * groups * 2 + 2 * g + 1];
      const __m256 scale_v = _mm256_set1_ps(scale);
      for (int t = 0; t < kTokens; ++t) {
        acc[t][r] = _mm256_fmadd_ps(scale_v, _mm256_add_ps(sum_lo[t][r], sum_hi[t][r]), acc[t][r]);
        bias_part[t][r] += bias * x_sums[t * groups + g];
      }
    }
  }
  for (int t = 0; t < kTokens; ++t)
    for (int r = 0; r < kRows; ++r) out[t * out_stride + row + r] = sum_f32x8(acc[t][r]) + bias_part[t][r];
}

template <int kBits>
RS_TARGET_AVX2 void decode_codes(const LinearWeight& w, int64_t row, float* out) {
  const int64_t in = w.in_features, group = w.scale_block_cols, groups = in / group;
  const uint8_t* codes = w.weight.data_as<uint8_t>() + row * (in * kBits / 8);
  const float* pairs = w.scales.data_as<float>() + row * groups * 2;
  for (int64_t g = 0; g < groups; ++g) {
    const __m256 scale = _mm256_set1_ps(pairs[2 * g]), bias = _mm256_set1_ps(pairs[2 * g + 1]);
    for (int64_t i = g * group; i < (g + 1) * group; i += 16) {
      __m256 lo, hi;
      codes16<kBits>(codes, i, lo, hi);
      _mm256_storeu_ps(out + i, _mm256_fmadd_ps(scale, lo, bias));
      _mm256_storeu_ps(out + i + 8, _mm256_fmadd_ps(scale, hi, bias));
    }
  }
}

// MXFP4 (gpt-oss experts): blocks of 32 inputs, 16 bytes of FP4 E2M1 codes (element 2k in the low nibble of byte k,
// 2k + 1 in the high one) and an E8M0 scale 2^(e - 127). Twice an E2M1 value is a small integer, so a byte table
// (pshufb) gives 2v exactly and the block's scale carries the half: 2^(e - 128), from a table of all 256.
RS_TARGET_AVX2 inline __m128i fp4_doubled_table() {
  return _mm_setr_epi8(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12);
}

const float* e8m0_half_scales() {
  static const auto table = [] {
    std::array<float, 256> t{};
    for (int e = 0; e < 256; ++e) t[e] = std::ldexp(1.0f, e - 128);
    return t;
  }();
  return table.data();
}

// kRows rows of MXFP4 blocks against x deinterleaved per 32 inputs (even inputs, then odd ones).
template <int kTokens, int kRows>
RS_TARGET_AVX2 void mxfp4_rows(const float* x, const LinearWeight& w, float* out, int64_t out_stride, int64_t row) {
  const int64_t in = w.in_features, blocks = in / 32;
  const uint8_t* codes = w.weight.data_as<uint8_t>() + row * blocks * 16;
  const uint8_t* exponents = w.scales.data_as<uint8_t>() + row * blocks;
  const float* half_scales = e8m0_half_scales();
  const __m128i table = fp4_doubled_table(), nibble = _mm_set1_epi8(0x0f);
  __m256 acc[kTokens][kRows];
  for (int t = 0; t < kTokens; ++t)
    for (int r = 0; r < kRows; ++r) acc[t][r] = _mm256_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    __m256 v[kRows][4];  // 2 x values: even inputs 0-7, 8-15 of the block's 16, then odd ones
    for (int r = 0; r < kRows; ++r) {
      const uint8_t* block = codes + r * blocks * 16 + b * 16;
      _mm_prefetch(reinterpret_cast<const char*>(block + 512), _MM_HINT_T0);
      const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block));
      const __m128i even = _mm_shuffle_epi8(table, _mm_and_si128(bytes, nibble));
      const __m128i odd = _mm_shuffle_epi8(table, _mm_and_si128(_mm_srli_epi16(bytes, 4), nibble));
      v[r][0] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(even));
      v[r][1] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(even, 8)));
      v[r][2] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(odd));
      v[r][3] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(odd, 8)));
    }
    for (int t = 0; t < kTokens; ++t) {
      const float* xb = x + t * in + b * 32;
      const __m256 x0 = _mm256_loadu_ps(xb), x1 = _mm256_loadu_ps(xb + 8), x2 = _mm256_loadu_ps(xb + 16),
                   x3 = _mm256_loadu_ps(xb + 24);
      for (int r = 0; r < kRows; ++r) {
        const __m256 sum = _mm256_fmadd_ps(v[r][0], x0, _mm256_mul_ps(v[r][1], x1));
        const __m256 sum2 = _mm256_fmadd_ps(v[r][2], x2, _mm256_mul_ps(v[r][3], x3));
        const __m256 scale = _mm256_set1_ps(half_scales[exponents[r * blocks + b]]);
        acc[t][r] = _mm256_fmadd_ps(scale, _mm256_add_ps(sum, sum2), acc[t][r]);
      }
    }
  }
  for (int t = 0; t < kTokens; ++t)
    for (int r = 0; r < kRows; ++r) out[t * out_stride + row + r] = sum_f32x8(acc[t][r]);
}

RS_TARGET_AVX2 void decode_mxfp4(const LinearWeight& w, int64_t row, float* out) {
  const int64_t blocks = w.in_features / 32;
  const uint8_t* codes = w.weight.data_as<uint8_t>() + row * blocks * 16;
  const uint8_t* exponents = w.scales.data_as<uint8_t>() + row * blocks;
  const __m128i table = fp4_doubled_table(), nibble = _mm_set1_epi8(0x0f);
  for (int64_t b = 0; b < blocks; ++b) {
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(codes + b * 16));
    const __m128i even = _mm_shuffle_epi8(table, _mm_and_si128(bytes, nibble));
    const __m128i odd = _mm_shuffle_epi8(table, _mm_and_si128(_mm_srli_epi16(bytes, 4), nibble));
    const __m128i first = _mm_unpacklo_epi8(even, odd), second = _mm_unpackhi_epi8(even, odd);  // inputs 0-15, 16-31
    const __m256 scale = _mm256_set1_ps(e8m0_half_scales()[exponents[b]]);
    const __m128i parts[4] = {first, _mm_srli_si128(first, 8), second, _mm_srli_si128(second, 8)};
    for (int p = 0; p < 4; ++p)
      _mm256_storeu_ps(out + b * 32 + 8 * p, _mm256_mul_ps(scale, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(parts[p]))));
  }
}

// Eight E4M3 codes (never NaN: weights) as f32, exactly: a normal code's exponent and mantissa moved into an f32's
// (exponent + 120), a subnormal one (exponent 0) as m x 2^-9, then the sign. Arithmetic, not a gather: 3x faster.
RS_TARGET_AVX2 inline __m256 e4m3x8(const uint8_t* p) {
  const __m256i codes = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  const __m256i magnitude = _mm256_and_si256(codes, _mm256_set1_epi32(0x7f));
  const __m256 normal =
      _mm256_castsi256_ps(_mm256_add_epi32(_mm256_slli_epi32(magnitude, 20), _mm256_set1_epi32(120 << 23)));
  const __m256 subnormal = _mm256_mul_ps(_mm256_cvtepi32_ps(magnitude), _mm256_set1_ps(1.0f / 512));
  const __m256 is_subnormal = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(8), magnitude));
  const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(codes, _mm256_set1_epi32(0x80)), 24);
  return _mm256_or_ps(_mm256_blendv_ps(normal, subnormal, is_subnormal), _mm256_castsi256_ps(sign));
}

// kRows rows of FP8 E4M3 codes (Qwen's 128 x 128 blocks, per-channel or per-tensor scales): values summed per scale
// block, then scaled.
template <int kTokens, int kRows>
RS_TARGET_AVX2 void fp8_rows(const float* x, const LinearWeight& w, float* out, int64_t out_stride, int64_t row) {
  const int64_t in = w.in_features, block = std::min(w.scale_block_cols, in);
  const uint8_t* codes = w.weight.data_as<uint8_t>() + row * in;
  const float* scale_rows[kRows];
  for (int r = 0; r < kRows; ++r)
    scale_rows[r] = w.scales.data_as<float>() + ((row + r) / w.scale_block_rows) * w.scales.dim(1);
  __m256 acc[kTokens][kRows];
  for (int t = 0; t < kTokens; ++t)
    for (int r = 0; r < kRows; ++r) acc[t][r] = _mm256_setzero_ps();
  for (int64_t b0 = 0, b = 0; b0 < in; b0 += block, ++b) {
    __m256 sum[kTokens][kRows];
    for (int t = 0; t < kTokens; ++t)
      for (int r = 0; r < kRows; ++r) sum[t][r] = _mm256_setzero_ps();
    for (int64_t i = b0; i < std::min(in, b0 + block); i += 8) {
      __m256 v[kRows];
      for (int r = 0; r < kRows; ++r) {
        _mm_prefetch(reinterpret_cast<const char*>(codes + r * in + i + 512), _MM_HINT_T0);
        v[r] = e4m3x8(codes + r * in + i);
      }
      for (int t = 0; t < kTokens; ++t) {
        const __m256 xv = _mm256_loadu_ps(x + t * in + i);
        for (int r = 0; r < kRows; ++r) sum[t][r] = _mm256_fmadd_ps(v[r], xv, sum[t][r]);
      }
    }
    for (int r = 0; r < kRows; ++r) {
      const __m256 scale = _mm256_set1_ps(scale_rows[r][b]);
      for (int t = 0; t < kTokens; ++t) acc[t][r] = _mm256_fmadd_ps(scale, sum[t][r], acc[t][r]);
    }
  }
  for (int t = 0; t < kTokens; ++t)
    for (int r = 0; r < kRows; ++r) out[t * out_stride + row + r] = sum_f32x8(acc[t][r]);
}

// Sums of x over each group of every token: [tokens][groups].
RS_TARGET_AVX2 void group_sums(const float* x, int64_t tokens, int64_t in, int64_t group, float* sums) {
  const int64_t groups = in / group;
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t g = 0; g < groups; ++g) {
      __m256 s = _mm256_setzero_ps();
      for (int64_t i = g * group; i < (g + 1) * group; i += 8) s = _mm256_add_ps(s, _mm256_loadu_ps(x + t * in + i));
      sums[t * groups + g] = sum_f32x8(s);
    }
}

// Rows [row_begin, row_end): blocks of kRows, the rest one by one.
template <int kRows, typename Block, typename Single>
void over_rows(int64_t row_begin, int64_t row_end, Block block, Single single) {
  int64_t r = row_begin;
  for (; r + kRows <= row_end; r += kRows) block(r);
  for (; r < row_end; ++r) single(r);
}

// x as the row kernels read it, made once per call: [tokens][in], each 16 (4-bit codes) or 32 (MXFP4) inputs
// deinterleaved into even and odd ones; and for integer codes the group sums of x, [tokens][groups].
struct PreparedX {
  const float* x = nullptr;
  const float* sums = nullptr;
  int64_t groups = 0;
};

PreparedX prepare_x(const float* x, int64_t tokens, const LinearWeight& w) {
  thread_local std::vector<float> sums, x_split;
  const int64_t in = w.in_features;
  PreparedX p{x};
  const bool affine = w.format == LinearWeight::Format::kAffine;
  if (affine) {
    p.groups = in / w.scale_block_cols;
    sums.resize(tokens * p.groups);
    group_sums(x, tokens, in, w.scale_block_cols, sums.data());
    p.sums = sums.data();
  }
  if ((affine && w.bits == 4) || w.format == LinearWeight::Format::kMxfp4) {
    x_split.resize(tokens * in);
    affine ? deinterleave<16>(x, tokens, in, x_split.data()) : deinterleave<32>(x, tokens, in, x_split.data());
    p.x = x_split.data();
  }
  return p;
}

// Rows [row_begin, row_end) for kTokens tokens of the prepared x.
template <int kTokens>
void rows_for_tokens(const float* x, const float* sums, const LinearWeight& w, float* out, int64_t out_stride,
                     int64_t row_begin, int64_t row_end) {
  // One token has the fewest independent chains: it takes two rows at a time.
  constexpr int kRows = kTokens == 1 ? 2 : 1;
  if (w.format == LinearWeight::Format::kDense) {
    // bf16 rows need one FMA per 8 weights against the codes' two: more rows at once keep more sums in flight.
    constexpr int kBf16Rows = 4 / kTokens > 0 ? 4 / kTokens : 1;
    const uint16_t* weight = w.weight.data_as<uint16_t>();
    const int64_t in = w.in_features;
    over_rows<kBf16Rows>(
        row_begin, row_end, [&](int64_t r) { bf16_rows<kTokens, kBf16Rows>(x, weight, in, out, out_stride, r); },
        [&](int64_t r) { bf16_rows<kTokens, 1>(x, weight, in, out, out_stride, r); });
  } else if (w.format == LinearWeight::Format::kFp8) {
    over_rows<kRows>(
        row_begin, row_end, [&](int64_t r) { fp8_rows<kTokens, kRows>(x, w, out, out_stride, r); },
        [&](int64_t r) { fp8_rows<kTokens, 1>(x, w, out, out_stride, r); });
  } else if (w.format == LinearWeight::Format::kMxfp4) {
    over_rows<kRows>(
        row_begin, row_end, [&](int64_t r) { mxfp4_rows<kTokens, kRows>(x, w, out, out_stride, r); },
        [&](int64_t r) { mxfp4_rows<kTokens, 1>(x, w, out, out_stride, r); });
  } else if (w.bits == 4) {
    over_rows<kRows>(
        row_begin, row_end, [&](int64_t r) { affine_rows<4, kTokens, kRows>(x, w, sums, out, out_stride, r); },
        [&](int64_t r) { affine_rows<4, kTokens, 1>(x, w, sums, out, out_stride, r); });
  } else {
    over_rows<kRows>(
        row_begin, row_end, [&](int64_t r) { affine_rows<8, kTokens, kRows>(x, w, sums, out, out_stride, r); },
        [&](int64_t r) { affine_rows<8, kTokens, 1>(x, w, sums, out, out_stride, r); });
  }
}

}  // namespace

void avx2_gemv(const float* x, int64_t tokens, const LinearWeight& w, float* out, int64_t out_stride, int64_t row_begin,
               int64_t row_end) {
  RS_CHECK(cpu_has_avx2_fma() && tokens >= 1 && tokens <= kAvx2GemvTokens, "avx2_gemv: {} tokens on this CPU", tokens);
  const PreparedX p = prepare_x(x, tokens, w);
  const int64_t in = w.in_features;
  // At most 4 tokens per pass (more sums would not fit the 16 registers); with more, each block of 16 rows takes
  // the passes in turn, so the later ones read its weights from cache, not memory.
  constexpr int64_t kBlockRows = 16;
  for (int64_t r0 = row_begin; r0 < row_end; r0 += kBlockRows) {
    const int64_t r1 = std::min(row_end, r0 + kBlockRows);
    for (int64_t t0 = 0; t0 < tokens; t0 += 4) {
      const float* xt = p.x + t0 * in;
      const float* sums = p.sums ? p.sums + t0 * p.groups : nullptr;
      float* ot = out + t0 * out_stride;
      switch (std::min<int64_t>(4, tokens - t0)) {
        case 1: rows_for_tokens<1>(xt, sums, w, ot, out_stride, r0, r1); break;
        case 2: rows_for_tokens<2>(xt, sums, w, ot, out_stride, r0, r1); break;
        case 3: rows_for_tokens<3>(xt, sums, w, ot, out_stride, r0, r1); break;
        default: rows_for_tokens<4>(xt, sums, w, ot, out_stride, r0, r1); break;
      }
    }
  }
}

bool avx2_decode_affine_row(const LinearWeight& w, int64_t row, float* out) {
  if (!cpu_has_avx2_fma() || w.format != LinearWeight::Format::kAffine || (w.bits != 4 && w.bits != 8)) return false;
  const int64_t group = w.scale_block_cols;
  if (group <= 0 || group % 16 != 0 || w.in_features % group != 0) return false;
  w.bits == 4 ? decode_codes<4>(w, row, out) : decode_codes<8>(w, row, out);
  return true;
}

bool avx2_decode_mxfp4_row(const LinearWeight& w, int64_t row, float* out) {
  if (!cpu_has_avx2_fma() || w.format != LinearWeight::Format::kMxfp4 || w.in_features % 32 != 0) return false;
  decode_mxfp4(w, row, out);
  return true;
}

#else

bool avx2_decode_affine_row(const LinearWeight&, int64_t, float*) { return false; }
bool avx2_decode_mxfp4_row(const LinearWeight&, int64_t, float*) { return false; }
void avx2_gemv(const float*, int64_t, const LinearWeight&, float*, int64_t, int64_t, int64_t) {
  RS_FAIL("avx2_gemv needs an x86-64 CPU");
}

#endif

}  // namespace rs::cpu
