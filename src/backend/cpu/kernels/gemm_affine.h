// Integer (LinearWeight::kAffine: MLX, AWQ, GPTQ, GGUF) weights on the CPU fast path, read as their codes, so decode
// streams a quarter of bf16's bytes (4-bit) and a model needs no bf16 copy (CpuBackend::prepare_linear keeps one for
// large steps only while memory allows).
//   - decode (affine_gemv, up to kAffineGemvTokens tokens): each 64-input (4-bit) or 32-input (8-bit) chunk of a row
//     becomes bf16 code values through a 32-entry table (vpermw; 8-bit codes as low nibble + 16 x high nibble, both
//     exact), dotted with the bf16-rounded activations (dpbf16), scaled per group in f32; the biases multiply each
//     group's sum of those rounded activations. Error: that of rounding the activations to bf16 (the weights are
//     exact), as in the prefill GEMM; the bf16 copy this replaces rounded the weights instead.
//   - prefill (affine_gemm): each 64-column panel is decoded block by block into the bf16 GEMM's VNNI layout, holding
//     bf16(scale * q + bias) bit for bit as a dequantized bf16 copy would (for normal values, with scale * q exact in
//     f32, as every format we load gives), and multiplied by gemm_bf16_panel_block.
#pragma once

#include <cstdint>

#include "backend/backend.h"
#include "base/thread_pool.h"

namespace rs::cpu {

constexpr int64_t kAffineGemvTokens = 8;

// Whether this build (AVX512-BF16) runs `w` with these kernels: 4- or 8-bit codes, `in` a multiple of 64 (4-bit) or 32
// (8-bit), groups of 16 or a multiple of 32 that tile the kernels' chunks.
bool affine_kernel_supports(const LinearWeight& w);

// Compact forms of a weight's (scale, bias) pairs that the GEMV may read instead of them (the GEMM still reads the
// pairs, so both stay in memory). Either
//   - symmetric (`scales`, `zero`): every bias is -zero x its scale, zero a power of two (GGUF's Q8_0, Q6_K, Q5_0,
//     Q4_0): one float per group, `scales` [out, in / group] - a decode step reads 1.125 bytes per Q8_0 weight,
//     not 1.25;
//   - two-level (`levels`, `supers`): groups of 32 in superblocks of 256 inputs, scale = supers[2 s] x
//     levels[2 g] and bias = supers[2 s + 1] x levels[2 g + 1] exactly (GGUF's K-quants: an f16 super-scale times a
//     small integer per group), `levels` u8 [out, in / group, 2] and `supers` f32 [out, in / 256, 2] - 0.59 bytes per
//     Q4_K weight instead of 0.75.
struct CompactScales {
  const float* scales = nullptr;
  float zero = 0.0f;
  const uint8_t* levels = nullptr;
  const float* supers = nullptr;
};

// out [tokens, w.out_features] (rows out_stride apart) = x [tokens, w.in_features] . W^T (+ bias [out], or null).
// row_invariant: every token's arithmetic independent of the number of tokens (BackendOptions::deterministic):
// always the GEMM.
void affine_linear(ThreadPool& pool, const float* x, int64_t tokens, const LinearWeight& w, const float* bias,
                   float* out, int64_t out_stride, bool row_invariant, const CompactScales* compact = nullptr);

// The two halves on one thread, over output rows [row_begin, row_end) (affine_gemm: whole 64-row panels of them).
void affine_gemv(const float* x, int64_t tokens, const LinearWeight& w, float* out, int64_t row_begin, int64_t row_end,
                 const CompactScales* compact = nullptr);
void affine_gemm(const float* x, int64_t tokens, const LinearWeight& w, float* out, int64_t panel_begin,
                 int64_t panel_end);

}  // namespace rs::cpu
