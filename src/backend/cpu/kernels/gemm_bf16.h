// AVX-512 BF16 GEMM for prefill: bf16 weights x bf16-rounded activations, f32 accumulation (as HF bf16 and llama.cpp),
// on row-major weights or on weights repacked once at load into VNNI panels (plus the f32-activation GEMV for those).
#pragma once

#include <cstdint>

namespace rs::cpu {

// True when this build can run gemm_bf16 (compiled with AVX512-BF16) and RS_CPU_KERNELS=avx2 does not switch it off.
bool has_bf16_gemm();
// out[t * out_stride + r] = sum_k x[t, k] * w[r, k] for rows [row_begin, row_end), all num_tokens tokens.
// x and w are bf16 bit patterns, row-major with row length `in`.
void gemm_bf16(const uint16_t* x, int64_t num_tokens, const uint16_t* w, int64_t in, float* out, int64_t out_stride,
               int64_t row_begin, int64_t row_end);

// ---- Packed (VNNI) weights. A weight [out, in] becomes panels of kPackedPanelCols output columns; panel p holds
// [in_pairs][kPackedPanelCols][2] bf16, i.e. for each pair of inputs (2i, 2i+1) the 64 columns' two weights side by
// side, so one zmm load gives 16 columns x 2 inputs for _mm512_dpbf16_ps against a broadcast activation pair.
// Columns past `out` and the odd input past `in` are zero. Row-major reads of the packed copy are never needed.
constexpr int64_t kPackedPanelCols = 64;
inline int64_t packed_in_pairs(int64_t in) { return (in + 1) / 2; }
inline int64_t packed_panels(int64_t out) { return (out + kPackedPanelCols - 1) / kPackedPanelCols; }
// Number of bf16 values in the packed copy of a [out, in] weight.
inline int64_t packed_elements(int64_t out, int64_t in) {
  return packed_panels(out) * packed_in_pairs(in) * kPackedPanelCols * 2;
}
// packed <- w (bf16 [out, in] row-major). packed has packed_elements(out, in) values.
void pack_bf16_weight(const uint16_t* w, int64_t out, int64_t in, uint16_t* packed);

// out[t * out_stride + c] = sum_k x[t, k] * w[c, k] for the columns of panels [panel_begin, panel_end) below
// `out_cols`. x: bf16 [num_tokens, x_stride] with x_stride = 2 * packed_in_pairs(in) and the padding input (if any)
// zero.
void gemm_bf16_packed(const uint16_t* x, int64_t num_tokens, int64_t x_stride, const uint16_t* packed, int64_t in,
                      int64_t out_cols, float* out, int64_t out_stride, int64_t panel_begin, int64_t panel_end);
// One block of one panel, the step gemm_bf16_packed repeats: `block` holds `block_pairs` input pairs of a 64-column
// panel ([block_pairs][64][2] bf16); x points at the block's first input of token 0; out at the panel's first column
// (`cols` <= 64 of them written); `accumulate` adds to out (the panel's later blocks). next_block, if not null, is
// pulled into L2 while this block computes. Blocks of kGemmBlockPairs keep a panel's block in L2 while all tokens pass.
// 512 pairs x 256 B = 128 KiB: longer blocks than an L1-sized 64 pairs amortise each tile's accumulator load/store over
// more steps: ~367 -> ~415 GFLOP/s on 2 Zen 4 cores (cpu_gemm_bench).
constexpr int64_t kGemmBlockPairs = 512;
void gemm_bf16_panel_block(const uint16_t* x, int64_t num_tokens, int64_t x_stride, const uint16_t* block,
                           int64_t block_pairs, int64_t cols, float* out, int64_t out_stride, bool accumulate,
                           const uint16_t* next_block);
// Same product with exact f32 activations x [num_tokens, in] (num_tokens <= 4, the decode path): each weight is
// widened to f32, so this is bandwidth-bound on the packed stream.
void gemv_bf16_packed(const float* x, int64_t num_tokens, const uint16_t* packed, int64_t in, int64_t out_cols,
                      float* out, int64_t out_stride, int64_t panel_begin, int64_t panel_end);

}  // namespace rs::cpu
