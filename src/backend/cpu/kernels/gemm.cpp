// Linear layers on CPU: out = x . W^T (+ bias). f32 weights go straight to OpenBLAS; bf16/f16/MXFP4/FP8 weights are
// decoded panel by panel into f32 (exact) so that small batches stream weights once and big ones use sgemm.
#include <cblas.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "backend/cpu/kernels/affine_parts.h"
#include "backend/cpu/kernels/gemm_affine.h"
#include "backend/cpu/kernels/gemm_bf16.h"
#include "backend/cpu/kernels/gemv_avx2.h"
#include "backend/cpu/kernels/kernels.h"
#include "backend/cpu/kernels/vec.h"

namespace rs::cpu {
namespace {

constexpr int64_t kPanelRows = 64;     // output rows decoded at a time
constexpr int64_t kGemvMaxTokens = 4;  // up to this many tokens, bf16 rows are dotted directly

// Decodes MXFP4 row `row` ([in/32 groups of 16 bytes] + one E8M0 scale per group) into f32.
void decode_mxfp4_row(const LinearWeight& w, int64_t row, float* out) {
  if (avx2_decode_mxfp4_row(w, row, out)) return;  // the same values, a block at a time
  const int64_t groups = w.in_features / 32;
  const uint8_t* blocks = w.weight.data_as<uint8_t>() + row * groups * 16;
  const uint8_t* scales = w.scales.data_as<uint8_t>() + row * groups;
  for (int64_t g = 0; g < groups; ++g) {
    const float scale = std::ldexp(1.0f, static_cast<int>(scales[g]) - 127);
    for (int k = 0; k < 16; ++k) {
      const uint8_t byte = blocks[g * 16 + k];
      out[g * 32 + 2 * k] = fp4_e2m1_to_f32(byte & 15) * scale;
      out[g * 32 + 2 * k + 1] = fp4_e2m1_to_f32(byte >> 4) * scale;
    }
  }
}

void decode_row(const LinearWeight& w, int64_t row, float* out) {
  if (w.format == LinearWeight::Format::kMxfp4) {
    decode_mxfp4_row(w, row, out);
  } else if (w.format == LinearWeight::Format::kFp8) {
    decode_fp8_row(w, row, out);
  } else if (w.format == LinearWeight::Format::kAffine) {
    decode_affine_row(w, row, out);
  } else {
    load_row(w.weight, row, out, w.in_features);
  }
}

#if defined(__AVX512F__)
// Dots bf16 rows [row_begin, row_end) with up to kGemvMaxTokens f32 activations; weights are read once.
void gemv_bf16(const float* x, int64_t num_tokens, const uint16_t* weight, int64_t in, float* out, int64_t out_stride,
               int64_t row_begin, int64_t row_end) {
  for (int64_t r = row_begin; r < row_end; ++r) {
    const uint16_t* wr = weight + r * in;
    __m512 acc[kGemvMaxTokens];
    for (int64_t t = 0; t < num_tokens; ++t) acc[t] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= in; i += 16) {
      _mm_prefetch(reinterpret_cast<const char*>(wr + i + 512), _MM_HINT_T0);
      const __m512 wv = load_bf16x16(wr + i);
      for (int64_t t = 0; t < num_tokens; ++t) acc[t] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(x + t * in + i), acc[t]);
    }
    for (int64_t t = 0; t < num_tokens; ++t) {
      float sum = _mm512_reduce_add_ps(acc[t]);
      for (int64_t j = i; j < in; ++j) sum += bf16_to_f32(wr[j]) * x[t * in + j];
      out[t * out_stride + r] = sum;
    }
  }
}
#endif

// out[t * stride + c] += bias[c] for tokens t and columns [c0, c1) (no-op without a bias).
void add_bias(float* out, int64_t stride, int64_t tokens, const std::vector<float>& bias, int64_t c0, int64_t c1) {
  if (bias.empty()) return;
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t c = c0; c < c1; ++c) out[t * stride + c] += bias[c];
}

// Weights repacked by CpuBackend::prepare_linear: decode (<= kGemvMaxTokens) keeps f32 activations, prefill rounds
// them to bf16 once. Threads split the 64-column panels, so each streams its own contiguous part of the weight.
void linear_packed(ThreadPool& pool, const Tensor& x, const LinearWeight& w, const std::vector<float>& bias, Tensor out,
                   bool row_invariant) {
  const int64_t tokens = x.rows(), in = w.in_features, cols = w.out_features;
  const bool gemm = tokens > kGemvMaxTokens || row_invariant;
  const uint16_t* packed = w.packed.data_as<uint16_t>();
  float* o = out.data_as<float>();
  const float* xf = x.data_as<float>();
  // The calling thread's grow-only scratch (workers read it through the pointer while the caller waits in
  // parallel_for): a per-call vector cost a zero-fill and fresh pages on every prefill GEMM (~3% of prefill).
  thread_local std::unique_ptr<uint16_t[]> scratch;
  thread_local int64_t scratch_size = 0;
  const int64_t x_stride = 2 * packed_in_pairs(in);
  uint16_t* x_bf16 = nullptr;
  if (gemm) {
    if (tokens * x_stride > scratch_size) {
      scratch = std::make_unique_for_overwrite<uint16_t[]>(tokens * x_stride);
      scratch_size = tokens * x_stride;
    }
    x_bf16 = scratch.get();
    pool.parallel_for(tokens, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) round_row_to_bf16(xf + t * in, in, x_bf16 + t * x_stride);
      if (x_stride != in)
        for (int64_t t = begin; t < end; ++t) x_bf16[t * x_stride + in] = 0;
    });
  }
  pool.parallel_for(packed_panels(cols), [&](int64_t begin, int64_t end) {
    if (gemm) {
      gemm_bf16_packed(x_bf16, tokens, x_stride, packed, in, cols, o, cols, begin, end);
    } else {
      gemv_bf16_packed(xf, tokens, packed, in, cols, o, cols, begin, end);
    }
    add_bias(o, cols, tokens, bias, begin * kPackedPanelCols, std::min(cols, end * kPackedPanelCols));
  });
}

}  // namespace

void decode_fp8_row(const LinearWeight& w, int64_t row, float* out) {
  // Each code's value, scaled by its block's scale and rounded once to f32: the exactly dequantized weight.
  const int64_t in = w.in_features, block = w.scale_block_cols;
  const uint8_t* codes = w.weight.data_as<uint8_t>() + row * in;
  const float* scales = w.scales.data_as<float>() + (row / w.scale_block_rows) * w.scales.dim(1);
  for (int64_t b = 0; b * block < in; ++b) {
    const int64_t begin = b * block, end = std::min(in, begin + block);
    fp8_row_to_f32(codes + begin, end - begin, scales[b], out + begin);
  }
}

void decode_affine_row(const LinearWeight& w, int64_t row, float* out) {
  // scale * q is exact in f32: a 16-bit scale (MLX, AWQ, GPTQ, GGUF's Q8_0) times a code of at most 8 bits, or a GGUF
  // K-quant's f16 super-scale times its sub-scale times the type's code (Q6_K: 11 + 7 + 6 bits, the widest) - at most
  // 24 significant bits for every type we load. The bias is added with one rounding: the exactly dequantized weight.
  // (kernels/gemm_affine's panel decode relies on this to give the same bits with one fma.)
  if (avx2_decode_affine_row(w, row, out)) return;  // the same values, 16 at a time
  const int64_t in = w.in_features, group = w.scale_block_cols, groups = in / group;
  const int bits = w.bits;
  const uint32_t mask = (1u << bits) - 1;
  const uint8_t* codes = w.weight.data_as<uint8_t>() + row * (in * bits / 8);
  const float* pairs = w.scales.data_as<float>() + row * groups * 2;
  for (int64_t g = 0; g < groups; ++g) {
    const float scale = pairs[2 * g], bias = pairs[2 * g + 1];
    for (int64_t i = g * group; i < (g + 1) * group; ++i) {
      const int64_t bit = i * bits;
      out[i] = scale * static_cast<float>((codes[bit >> 3] >> (bit & 7)) & mask) + bias;
    }
  }
}

void linear_rows(const float* x, int64_t num_tokens, const LinearWeight& w, const float* bias, float* out,
                 int64_t out_stride, int64_t row_begin, int64_t row_end, bool row_invariant) {
  const int64_t in = w.in_features;
  if (row_begin >= row_end) return;
  if (row_invariant && num_tokens > 1) {
    // Token by token (or in the GEMV's groups, whose per-token arithmetic is the same for any group size): OpenBLAS
    // picks different kernels for different row counts.
#if defined(__AVX512F__)
    const bool grouped_gemv = w.format == LinearWeight::Format::kDense && w.weight.dtype() == DType::kBF16;
#else
    const bool grouped_gemv = false;
#endif
    const int64_t group = grouped_gemv ? kGemvMaxTokens : 1;
    for (int64_t t = 0; t < num_tokens; t += group)
      linear_rows(x + t * in, std::min(group, num_tokens - t), w, bias, out + t * out_stride, out_stride, row_begin,
                  row_end, false);
    return;
  }
  const bool dense_f32 = w.format == LinearWeight::Format::kDense && w.weight.dtype() == DType::kF32;
  if (dense_f32) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(num_tokens),
                static_cast<int>(row_end - row_begin), static_cast<int>(in), 1.0f, x, static_cast<int>(in),
                w.weight.data_as<float>() + row_begin * in, static_cast<int>(in), 0.0f, out + row_begin,
                static_cast<int>(out_stride));
  } else
#if defined(__AVX512F__)
      if (w.format == LinearWeight::Format::kDense && w.weight.dtype() == DType::kBF16 &&
          num_tokens <= kGemvMaxTokens) {
    gemv_bf16(x, num_tokens, w.weight.data_as<uint16_t>(), in, out, out_stride, row_begin, row_end);
  } else
#endif
  {
    thread_local std::vector<float> panel;
    panel.resize(kPanelRows * in);
    for (int64_t r0 = row_begin; r0 < row_end; r0 += kPanelRows) {
      const int64_t rows = std::min(kPanelRows, row_end - r0);
      for (int64_t r = 0; r < rows; ++r) decode_row(w, r0 + r, panel.data() + r * in);
      if (num_tokens == 1) {
        for (int64_t r = 0; r < rows; ++r) out[r0 + r] = dot_f32(x, panel.data() + r * in, in);
      } else {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(num_tokens), static_cast<int>(rows),
                    static_cast<int>(in), 1.0f, x, static_cast<int>(in), panel.data(), static_cast<int>(in), 0.0f,
                    out + r0, static_cast<int>(out_stride));
      }
    }
  }
  if (bias) {
    for (int64_t t = 0; t < num_tokens; ++t)
      for (int64_t r = row_begin; r < row_end; ++r) out[t * out_stride + r] += bias[r];
  }
}

void linear(ThreadPool& pool, const Tensor& x, const LinearWeight& w, const Tensor& bias, Tensor out,
            bool bf16_activations, bool row_invariant) {
  const int64_t tokens = x.rows();
  RS_CHECK(x.dim(-1) == w.in_features && out.dim(-1) == w.out_features && out.rows() == tokens,
           "linear: x {} . W [{}, {}] -> out {}", x.shape_string(), w.out_features, w.in_features, out.shape_string());
  if (!w.input_order.empty()) {
    // GPTQ act-order: the activations in the weight's column order, then the product as for any weight (worker threads
    // read the caller's buffer while it waits).
    thread_local std::vector<float> ordered;
    ordered.resize(tokens * w.in_features);
    const int32_t* order = w.input_order.data_as<int32_t>();
    const float* xf = x.data_as<float>();
    for (int64_t t = 0; t < tokens; ++t)
      for (int64_t i = 0; i < w.in_features; ++i) ordered[t * w.in_features + i] = xf[t * w.in_features + order[i]];
    LinearWeight plain = w;
    plain.input_order = Tensor();
    linear(pool, Tensor(ordered.data(), DType::kF32, {tokens, w.in_features}), plain, bias, out, bf16_activations,
           row_invariant);
    return;
  }
  std::vector<float> bias_f32;
  if (!bias.empty()) {
    bias_f32.resize(w.out_features);
    load_row(bias.view({1, w.out_features}), 0, bias_f32.data(), w.out_features);
  }
  // Integer codes in place (kernels/gemm_affine); a bf16 copy, where prepare_linear kept one, serves steps of more than
  // 4 rows below (the same values as the codes' panel decode; from 5 rows on it beats the GEMV on the codes).
  const bool gemv_rows = tokens <= (w.packed.empty() ? kAffineGemvTokens : 4) && !row_invariant;
  if (bf16_activations && affine_kernel_supports(w) && (w.packed.empty() || gemv_rows)) {
    const float* b = bias_f32.empty() ? nullptr : bias_f32.data();
    if (w.packed_rows.empty())
      affine_linear(pool, x.data_as<float>(), tokens, w, b, out.data_as<float>(), w.out_features, row_invariant);
    else  // narrowed row ranges (CpuBackend::prepare_linear)
      affine_parts_linear(pool, x.data_as<float>(), tokens, w, stored_parts(w.packed_rows), b, out.data_as<float>(),
                          row_invariant);
    return;
  }
  // CPUs without AVX512-BF16 (kernels/gemv_avx2.h): decode reads bf16 and integer weights as stored.
  if (bf16_activations && !row_invariant && tokens > 0 && tokens <= kAvx2GemvTokens && avx2_gemv_supports(w)) {
    pool.parallel_for(
        w.out_features,
        [&](int64_t begin, int64_t end) {
          float* o = out.data_as<float>();
          avx2_gemv(x.data_as<float>(), tokens, w, o, w.out_features, begin, end);
          add_bias(o, w.out_features, tokens, bias_f32, begin, end);
        },
        16);
    return;
  }
  if (!w.packed.empty()) {
    linear_packed(pool, x, w, bias_f32, out, row_invariant);
    return;
  }
  const bool use_bf16_gemm = bf16_activations && (tokens > kGemvMaxTokens || row_invariant) && has_bf16_gemm() &&
                             w.format == LinearWeight::Format::kDense && w.weight.dtype() == DType::kBF16;
  if (use_bf16_gemm) {
    std::vector<uint16_t> x_bf16;  // not thread_local: worker threads read it
    x_bf16.resize(tokens * w.in_features);
    const float* xf = x.data_as<float>();
    for (size_t i = 0; i < x_bf16.size(); ++i) x_bf16[i] = f32_to_bf16(xf[i]);
    pool.parallel_for(
        w.out_features,
        [&](int64_t begin, int64_t end) {
          float* o = out.data_as<float>();
          gemm_bf16(x_bf16.data(), tokens, w.weight.data_as<uint16_t>(), w.in_features, o, w.out_features, begin, end);
          add_bias(o, w.out_features, tokens, bias_f32, begin, end);
        },
        16);
    return;
  }
  // Split output features across threads in multiples of 16 (whole cache lines of out).
  pool.parallel_for(
      w.out_features,
      [&](int64_t begin, int64_t end) {
        linear_rows(x.data_as<float>(), tokens, w, bias_f32.empty() ? nullptr : bias_f32.data(), out.data_as<float>(),
                    w.out_features, begin, end, row_invariant);
      },
      16);
}

}  // namespace rs::cpu
