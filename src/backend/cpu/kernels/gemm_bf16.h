// AVX-512 BF16 GEMM for prefill: bf16 weights x bf16-rounded activations, f32 accumulation (as HF bf16 and llama.cpp).
#pragma once

#include <cstdint>

namespace rs::cpu {

// True when this build can run gemm_bf16 (compiled with AVX512-BF16).
bool has_bf16_gemm();
// out[t * out_stride + r] = sum_k x[t, k] * w[r, k] for rows [row_begin, row_end), all num_tokens tokens.
// x and w are bf16 bit patterns, row-major with row length `in`.
void gemm_bf16(const uint16_t* x, int64_t num_tokens, const uint16_t* w, int64_t in, float* out, int64_t out_stride,
               int64_t row_begin, int64_t row_end);

}  // namespace rs::cpu
