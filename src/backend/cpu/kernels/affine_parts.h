// Fused integer weights read back in the narrowest form each of their row ranges holds exactly. The loader fuses
// q|k|v (and gate|up) into one weight of one format, widening parts of different formats to the widest: GGUF's
// Q4_K_M stores q and k as Q4_K (4-bit, groups of 32) and v as Q6_K (8-bit codes, groups of 16), so its fused q|k|v is
// 8-bit in groups of 16 and a decode step streams q and k at 1.5 bytes per weight instead of 0.75. On the CPU fast
// path, prepare_linear finds the row ranges whose codes all fit 4 bits and whose (scale, bias) pairs repeat over pairs
// of groups, and keeps those rows as 4-bit codes in groups twice as long: the same values (lossless), half the bytes.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "base/thread_pool.h"

namespace rs::cpu {

// One row range of a narrowed weight (plain data: an array of them is what prepare_linear stores in
// LinearWeight::packed_rows for a kAffine weight).
struct AffinePart {
  int64_t row_begin = 0, rows = 0;
  int32_t bits = 0;
  int64_t group = 0;
  const uint8_t* codes = nullptr;  // [rows, in * bits / 8]
  const float* pairs = nullptr;    // [rows, in / group, 2]
  // Symmetric parts (every bias -zero x its scale, zero a power of two): the scales alone, [rows, in / group], which
  // the GEMV reads instead of the pairs (CompactScales); else null.
  const float* scales = nullptr;
  float zero = 0.0f;
  // Two-level parts (groups of 32 whose scales and biases are each a per-256-input factor times a byte, as
  // GGUF's K-quants store them): CompactScales::levels / supers; else null.
  const uint8_t* levels = nullptr;
  const float* supers = nullptr;
};

// The compact parts of a kAffine weight - row ranges of an 8-bit weight narrowed to 4 bits or merged groups, scales
// alone for symmetric parts, two levels for K-quant groups - with their new buffers in `keep_alive` (what does not
// change points into w's own buffers); empty when nothing compacts.
std::vector<AffinePart> compact_affine(const LinearWeight& w, std::vector<Buffer>& keep_alive);

// The parts as stored in / read from LinearWeight::packed_rows.
Tensor store_parts(const std::vector<AffinePart>& parts, std::vector<Buffer>& keep_alive);
std::span<const AffinePart> stored_parts(const Tensor& packed);

// affine_linear over every part into its rows of out [tokens, w.out_features].
void affine_parts_linear(ThreadPool& pool, const float* x, int64_t tokens, const LinearWeight& w,
                         std::span<const AffinePart> parts, const float* bias, float* out, bool row_invariant);

}  // namespace rs::cpu
