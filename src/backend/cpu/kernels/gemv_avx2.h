// Decode-sized products on x86 CPUs without AVX512-BF16 (AVX2 + FMA: Intel's laptops and desktops since Haswell,
// whose current parts have no AVX-512, and AMD's before Zen 4). There the bf16 and integer kernels (gemm_bf16,
// gemm_affine) do not exist, and a decode step used to widen every weight row to f32 in a scratch panel (integer codes
// one bit-field at a time) before dotting it. These GEMVs read the weights as stored instead - bf16, or 4- and 8-bit
// integer codes (MLX, AWQ, GPTQ, GGUF), MXFP4 (gpt-oss experts), FP8 - with f32 activations and f32 sums:
//   - bf16: each 8 values widened by a shift (exact) and fused-multiply-added into the token's sums;
//   - MXFP4: twice each E2M1 value from a byte table (pshufb), exact, the block's sum scaled by 2^(e - 128);
//   - FP8 E4M3: values rebuilt in f32 bits (exact), sums per scale block (128 x 128, channel, tensor);
//   - integer: per group, sum_i q_i x_i in f32 (codes widened exactly), then scale x that + bias x sum_i x_i, the
//     group sums of x computed once per call. The weights are exact; only the order of the f32 sums differs from
//     the dequantized weight's dot product.
// The functions are compiled for AVX2/FMA whatever the build's -march, and run when the CPU has them
// (__builtin_cpu_supports), so a portable build is fast on such machines too.
#pragma once

#include <cstdint>

#include "backend/backend.h"

namespace rs::cpu {

constexpr int64_t kAvx2GemvTokens = 8;  // most tokens (rows of x) one call takes

// Whether this machine runs the AVX2 GEMV and it applies to `w` on the fast path: the CPU has AVX2 and FMA, the
// AVX512-BF16 kernels are absent (or switched off with RS_CPU_KERNELS=avx2, for tests and benchmarks), and `w` is a
// dense bf16 weight, MXFP4, FP8 (scale blocks of a multiple of 8 inputs), or 4-/8-bit integer codes in groups of a
// multiple of 16 inputs, in its own column order.
bool avx2_gemv_supports(const LinearWeight& w);

// out[t * out_stride + r] = x[t] . W[r] for tokens t < `tokens` (<= kAvx2GemvTokens) and rows [row_begin, row_end).
// Up to 4 tokens per pass; 5-8 take two passes over each block of 16 rows (the second from cache).
void avx2_gemv(const float* x, int64_t tokens, const LinearWeight& w, float* out, int64_t out_stride, int64_t row_begin,
               int64_t row_end);

// Row `row` of a 4- or 8-bit integer weight as f32, scale x q + bias rounded once (decode_affine_row's values, bit for
// bit: scale x q is exact in f32), 16 inputs per step. False (nothing written) where the CPU or the weight does not
// allow it: then decode it one code at a time.
bool avx2_decode_affine_row(const LinearWeight& w, int64_t row, float* out);
// The same for an MXFP4 row: 2v x 2^(e - 128), exact (as decode_row's value x 2^(e - 127)).
bool avx2_decode_mxfp4_row(const LinearWeight& w, int64_t row, float* out);

// The CPU's feature test alone (tests call the kernel directly where it holds).
bool cpu_has_avx2_fma();
// RS_CPU_KERNELS=avx2: the AVX-512 kernels stay unused (has_bf16_gemm() is false; attention runs attention_avx2), so
// that a machine with them runs the paths of one without.
bool avx2_kernels_forced();

}  // namespace rs::cpu
