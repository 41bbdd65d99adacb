// Linear layers and MoE experts on CUDA: picks the GEMV (<= 8 rows, reads weights once), cuBLAS (dense f32, and dense
// bf16 with the activations split into bf16 hi + lo terms for near-fp32 accuracy on tensor cores), the tensor-core
// grouped GEMM (MoE groups and MXFP4 with many rows, fast path) or the tiled SIMT GEMM (the same in exact mode, and
// f16) by shape and format. MoE grouping stays on the device.
#include <algorithm>
#include <climits>
#include <cstdlib>

#include "backend/cuda/cuda_check.cuh"
#include "backend/cuda/device_context.cuh"
#include "backend/cuda/fp8_gemm.cuh"

namespace rs::cuda {
namespace {

WeightFormat weight_format(const LinearWeight& w) {
  if (w.format == LinearWeight::Format::kMxfp4) {
    RS_CHECK(w.in_features % 32 == 0 && !w.scales.empty(), "MXFP4 weight [{}, {}] needs in % 32 == 0 and scales",
             w.out_features, w.in_features);
    return WeightFormat::kMxfp4;
  }
  if (w.format == LinearWeight::Format::kFp8) {
    RS_CHECK(w.in_features % 16 == 0 && !w.scales.empty() && w.scales.dtype() == DType::kF32 &&
                 w.scale_block_rows > 0 && w.scale_block_cols > 0,
             "FP8 weight [{}, {}] needs in % 16 == 0 and f32 block scales", w.out_features, w.in_features);
    return WeightFormat::kFp8;
  }
  if (w.format == LinearWeight::Format::kAffine) {
    RS_CHECK(affine_readable(w),
             "{}-bit integer weight [{}, {}] in groups of {}: CUDA reads 4 bits in groups of 32k or "
             "8 bits in groups of 16k (prepare_linear dequantizes others)",
             w.bits, w.out_features, w.in_features, w.scale_block_cols);
    if (w.bits == 8) return WeightFormat::kInt8;
    return w.packed.empty() ? WeightFormat::kInt4 : WeightFormat::kInt4Tiled;  // packed: re-tiled by prepare_linear
  }
  switch (w.weight.dtype()) {
    case DType::kF32: return WeightFormat::kF32;
    case DType::kBF16: return WeightFormat::kBF16;
    case DType::kF16: return WeightFormat::kF16;
    default: RS_FAIL("linear weight of dtype {} is not supported on CUDA", dtype_name(w.weight.dtype()));
  }
}

// The FP8 scale layout the kernels read: a scale per 16-element vector, found by a shift (block columns a power-of-two
// multiple of 16, or one block over the whole row).
Fp8Scales fp8_scales(const LinearWeight& w) {
  Fp8Scales scales;
  scales.scales = w.scales.data_as<float>();
  scales.cols = w.scales.dim(1);
  scales.block_rows = static_cast<int32_t>(w.scale_block_rows);
  if (scales.cols == 1) {
    scales.vec_shift = 30;  // every vector of a row reads column 0
    return scales;
  }
  const int64_t vecs = w.scale_block_cols / 16;
  RS_CHECK(w.scale_block_cols % 16 == 0 && (vecs & (vecs - 1)) == 0,
           "FP8 scale blocks {} columns wide: CUDA reads blocks of 16 x 2^k columns", w.scale_block_cols);
  while ((int64_t{1} << scales.vec_shift) < vecs) ++scales.vec_shift;
  return scales;
}

AffineScales affine_scales(const LinearWeight& w) {
  AffineScales scales;
  scales.pairs = static_cast<const float2*>(w.scales.data());
  scales.groups = w.in_features / w.scale_block_cols;
  const int64_t vecs = w.scale_block_cols / (w.bits == 4 ? 32 : 16);  // 16-byte vectors per group
  while ((int64_t{1} << scales.vec_shift) < vecs) ++scales.vec_shift;
  while ((int64_t{1} << scales.group_shift) < w.scale_block_cols) ++scales.group_shift;
  return scales;
}

void check_on_device(const DeviceContext& ctx, const Tensor& t, const char* what) {
  RS_CHECK(t.empty() || (t.device().kind == DeviceKind::kCuda && t.device().index == ctx.index()),
           "{} is on {}, expected cuda:{}", what, device_name(t.device()), ctx.index());
}

void set_bias(GroupedWeights& w, const Tensor& bias, int64_t group_stride) {
  if (bias.empty()) return;
  w.bias = bias.data();
  w.bias_type = elem_type(bias.dtype());
  w.bias_group_stride = group_stride;
}

// out [T, out] = x [T, in] . W^T through cuBLAS: f32 weights with SGEMM; bf16 weights with one bf16 GEMM on x rounded
// to bf16 (the fast path, as every production engine; x may arrive in bf16 already, see
// Backend::linear_input_dtype), or in exact mode two on x's hi and lo halves (fp32 accumulation; x = hi + lo to
// ~2^-17, W exact) so the result stays close to the fp32 reference.
void cublas_linear(DeviceContext& ctx, const Tensor& x_tensor, int64_t tokens, const LinearWeight& w, float* out) {
  RS_CHECK(tokens < INT_MAX && w.in_features < INT_MAX && w.out_features < INT_MAX, "GEMM too large for cuBLAS");
  const int m = static_cast<int>(w.out_features), n = static_cast<int>(tokens), k = static_cast<int>(w.in_features);
  const float one = 1.0f, zero = 0.0f;
  if (x_tensor.dtype() == DType::kBF16) {
    RS_CHECK(w.weight.dtype() == DType::kBF16 && !ctx.exact_f32(), "bf16 linear inputs need a bf16 weight (fast path)");
    RS_CUBLAS_CHECK(cublasGemmEx(ctx.cublas(), CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one, w.weight.data(), CUDA_R_16BF, k,
                                 x_tensor.data(), CUDA_R_16BF, k, &zero, out, CUDA_R_32F, m, CUBLAS_COMPUTE_32F,
                                 CUBLAS_GEMM_DEFAULT));
    return;
  }
  const float* x = x_tensor.data_as<float>();
  if (w.weight.dtype() == DType::kF32) {
    RS_CUBLAS_CHECK(cublasSgemm(ctx.cublas(), CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one, w.weight.data_as<float>(), k, x,
                                k, &zero, out, m));
    return;
  }
  const size_t count = static_cast<size_t>(tokens) * w.in_features;
  void* hi = ctx.scratch(ScratchSlot::kSplitHi, count * 2);
  void* lo = ctx.exact_f32() ? ctx.scratch(ScratchSlot::kSplitLo, count * 2) : nullptr;
  launch_split_bf16(x, static_cast<int64_t>(count), hi, lo, ctx.stream());
  RS_CUBLAS_CHECK(cublasGemmEx(ctx.cublas(), CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one, w.weight.data(), CUDA_R_16BF, k,
                               hi, CUDA_R_16BF, k, &zero, out, CUDA_R_32F, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  if (!lo) return;
  RS_CUBLAS_CHECK(cublasGemmEx(ctx.cublas(), CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one, w.weight.data(), CUDA_R_16BF, k,
                               lo, CUDA_R_16BF, k, &one, out, CUDA_R_32F, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

enum class MoePath { kGemv, kGemvMma, kMma, kTiled };

// Checks that every expert of a list has the first one's format and shape; returns the format.
WeightFormat expert_format(const std::vector<LinearWeight>& list, int64_t out, int64_t in, size_t num_experts) {
  RS_CHECK(list.size() == num_experts, "{} expert weights for {} experts", list.size(), num_experts);
  const WeightFormat format = weight_format(list.front());
  for (const auto& w : list)
    RS_CHECK(weight_format(w) == format && w.out_features == out && w.in_features == in,
             "MoE experts differ in format or shape");
  return format;
}

// Arguments of a dense linear out [T, out_width] = x [T, in] . W^T over x's rows (implicit row chunks).
LinearArgs dense_args(const DeviceContext& ctx, const Tensor& x, const LinearWeight& w, const Tensor& bias,
                      Tensor out) {
  check_on_device(ctx, x, "linear input"), check_on_device(ctx, out, "linear output");
  check_on_device(ctx, w.weight, "linear weight"), check_on_device(ctx, bias, "linear bias");
  RS_CHECK(x.dtype() == DType::kF32 && out.dtype() == DType::kF32, "linear activations must be f32");
  const WeightFormat format = weight_format(w);
  LinearArgs args{};
  args.x = x.data_as<float>();
  args.x_stride = w.in_features;
  args.out = out.data_as<float>();
  args.out_stride = out.dim(-1);
  args.in_features = w.in_features;
  args.out_features = w.out_features;
  args.format = format;
  args.w.weight = w.weight.data();
  args.w.scales = format == WeightFormat::kMxfp4 ? w.scales.data_as<uint8_t>() : nullptr;
  if (format == WeightFormat::kFp8) args.w.fp8 = fp8_scales(w);
  if (format == WeightFormat::kInt4 || format == WeightFormat::kInt8 || format == WeightFormat::kInt4Tiled)
    args.w.affine = affine_scales(w);
  set_bias(args.w, bias, 0);
  args.rows.total_rows = x.rows();
  return args;
}

// The GEMV re-reads every activation row per pair of output features from L1: past a couple of rows (fast path) the
// rows no longer fit L1 and a tensor-core GEMM reading the weights once is faster. Exact mode keeps the GEMV's f32
// products for up to kGemvMaxRows rows.
bool gemv_applies(const DeviceContext& ctx, const LinearArgs& args) {
  const int64_t gemv_rows = ctx.exact_f32() ? kGemvMaxRows : kGemvFastMaxRows;
  return args.rows.total_rows <= gemv_rows &&
         gemv_supported(args.format, args.in_features, args.x, args.x_stride, args.w.weight);
}

// FP8: exact mode runs the GEMV (f32 products of the exactly decoded weights) in chunks of up to kGemvMaxRows rows.
// The fast path runs the GEMV for up to kGemvFastMaxRows rows (weights read once as FP8), past that a W8A8 GEMM on the
// FP8 tensor cores (activations quantized per token or 1 x 128 group; Fp8Gemm) where cuBLASLt takes the weight's
// scaling, else the GEMV up to kGemvMaxRows rows and a bf16 GEMM on the weight dequantized for this call beyond.
// Batch-invariant numerics would need one kernel for every row count: refused.
void run_fp8_linear(DeviceContext& ctx, const Tensor& x, const LinearWeight& w, const Tensor& bias, LinearArgs& args) {
  RS_CHECK(!ctx.batch_invariant(),
           "FP8 weights with --enable-deterministic-inference are not supported on CUDA yet (use --backend cpu, or a "
           "bf16 checkpoint)");
  RS_CHECK(gemv_supported(args.format, args.in_features, args.x, args.x_stride, args.w.weight),
           "FP8 linear [{}, {}]: the input must be 16-byte aligned with in % 16 == 0", w.out_features, w.in_features);
  const int64_t tokens = x.rows();
  const auto gemv = [&] {
    args.rows.chunk_rows = static_cast<int32_t>(std::min<int64_t>(tokens, kGemvMaxRows));
    launch_gemv(args, args.rows.chunk_rows, ctx.stream());
  };
  if (ctx.exact_f32() || tokens <= kGemvFastMaxRows) return gemv();
  if (ctx.fp8_gemm().run(args.x, tokens, w, args.out)) {
    if (!bias.empty()) launch_add_bias(args.out, tokens, w.out_features, bias.data(), args.w.bias_type, ctx.stream());
    return;
  }
  if (tokens <= kGemvMaxRows) return gemv();
  void* dequantized = ctx.scratch(ScratchSlot::kFp8Weight, static_cast<size_t>(w.out_features) * w.in_features * 2);
  launch_dequantize_fp8(w.weight.data_as<uint8_t>(), args.w.fp8, w.out_features, w.in_features, dequantized,
                        ctx.stream());
  LinearWeight bf16{LinearWeight::Format::kDense,
                    Tensor(dequantized, DType::kBF16, {w.out_features, w.in_features}, w.weight.device()), Tensor(),
                    w.out_features, w.in_features};
  cublas_linear(ctx, x, tokens, bf16, args.out);
  if (!bias.empty()) launch_add_bias(args.out, tokens, w.out_features, bias.data(), args.w.bias_type, ctx.stream());
}

// Rows up to which the fast path runs int4 weights through the tensor-core GEMV (chunks of up to 8 rows, each chunk
// reading the codes again, mostly from L2) rather than dequantizing the weight for cuBLAS. Measured on an H100
// (Qwen3-8B 4-bit g64 decode, docs/notes/int4.md): 16 rows 9.9 ms per step vs 14.5 dequantized, 32 rows 17.6 vs 15.0.
// RS_INT4_MMA_MAX_ROWS overrides it for measurements.
int64_t int4_mma_max_rows() {
  static const int64_t rows = [] {
    const char* env = std::getenv("RS_INT4_MMA_MAX_ROWS");
    return env ? std::max<int64_t>(0, std::atoll(env)) : int64_t{16};
  }();
  return rows;
}

// The fast path's int4 GEMV on tensor cores (codes decoded to bf16 weights in registers, activations rounded to bf16,
// f32 accumulation): the rows per chunk whose bf16 copy fits the kernel's shared memory (down_proj's 12,288 inputs
// take 4), or 0 where it does not apply.
int32_t int4_mma_rows(const DeviceContext& ctx, const LinearArgs& args, int64_t tokens) {
  if (ctx.exact_f32() || args.format != WeightFormat::kInt4 || tokens > int4_mma_max_rows()) return 0;
  for (auto rows = static_cast<int32_t>(std::min<int64_t>(tokens, kGemvMaxRows)); rows >= 1; --rows)
    if (gemv_mma_supported(args.format, args.in_features, args.x, args.x_stride, rows)) return rows;
  return 0;
}

// Integer weights: exact mode runs the SIMT GEMV (weights read as codes, f32 products) in chunks of kGemvMaxRows rows.
// The fast path runs int4 on tensor cores up to int4_mma_max_rows() rows and int8 through the SIMT GEMV up to
// kGemvMaxRows; larger batches run a bf16 GEMM on the weight dequantized for this call (cuBLAS on tensor cores; the
// dequantization, ~2.5 bytes per weight, costs ~15% of a 4,096-token prefill).
void run_affine_linear(DeviceContext& ctx, const Tensor& x, const LinearWeight& w, const Tensor& bias,
                       LinearArgs& args) {
  RS_CHECK(!ctx.batch_invariant(),
           "integer (MLX/AWQ/GPTQ) weights with --enable-deterministic-inference are not supported on CUDA yet (use "
           "--backend cpu)");
  RS_CHECK(gemv_supported(args.format, args.in_features, args.x, args.x_stride, args.w.weight),
           "integer linear [{}, {}]: the input must be 16-byte aligned", w.out_features, w.in_features);
  const int64_t tokens = x.rows();
  if (const int32_t rows = int4_mma_rows(ctx, args, tokens)) {
    args.rows.chunk_rows = rows;
    return launch_gemv_mma(args, rows, ctx.stream());
  }
  if (ctx.exact_f32() || tokens <= kGemvMaxRows) {
    args.rows.chunk_rows = static_cast<int32_t>(std::min<int64_t>(tokens, kGemvMaxRows));
    return launch_gemv(args, args.rows.chunk_rows, ctx.stream());
  }
  void* dequantized = ctx.scratch(ScratchSlot::kFp8Weight, static_cast<size_t>(w.out_features) * w.in_features * 2);
  launch_dequantize_affine(w.weight.data_as<uint8_t>(), w.scales.data_as<float>(), w.bits, w.scale_block_cols,
                           w.out_features, w.in_features, dequantized, false, args.format == WeightFormat::kInt4Tiled,
                           ctx.stream());
  LinearWeight bf16{LinearWeight::Format::kDense,
                    Tensor(dequantized, DType::kBF16, {w.out_features, w.in_features}, w.weight.device()), Tensor(),
                    w.out_features, w.in_features};
  cublas_linear(ctx, x, tokens, bf16, args.out);
  if (!bias.empty()) launch_add_bias(args.out, tokens, w.out_features, bias.data(), args.w.bias_type, ctx.stream());
}

}  // namespace

bool affine_readable(const LinearWeight& w) {
  return w.format == LinearWeight::Format::kAffine &&
         ((w.bits == 4 && w.scale_block_cols % 32 == 0) || (w.bits == 8 && w.scale_block_cols % 16 == 0)) &&
         w.scales.dtype() == DType::kF32;
}

void run_linear(DeviceContext& ctx, const Tensor& x, const LinearWeight& w, const Tensor& bias, Tensor out) {
  const int64_t tokens = x.rows();
  if (!w.input_order.empty()) {
    // GPTQ act-order: the activations in the weight's column order, then the product as for any weight.
    RS_CHECK(x.dtype() == DType::kF32 && x.dim(-1) == w.in_features && w.input_order.numel() == w.in_features,
             "linear: x {} for a weight of {} ordered inputs", x.shape_string(), w.in_features);
    check_on_device(ctx, x, "linear input"), check_on_device(ctx, w.input_order, "linear input order");
    ctx.activate();
    auto* ordered = static_cast<float*>(
        ctx.scratch(ScratchSlot::kOrderedInput, static_cast<size_t>(tokens * w.in_features) * sizeof(float)));
    launch_gather_columns(x.data_as<float>(), tokens, w.in_features, w.in_features, w.input_order.data_as<int32_t>(),
                          ordered, ctx.stream());
    LinearWeight plain = w;
    plain.input_order = Tensor();
    return run_linear(ctx, Tensor(ordered, DType::kF32, {tokens, w.in_features}, x.device()), plain, bias, out);
  }
  RS_CHECK(x.dim(-1) == w.in_features && out.dim(-1) == w.out_features && out.rows() == tokens,
           "linear: x {} . W [{}, {}] -> out {}", x.shape_string(), w.out_features, w.in_features, out.shape_string());
  if (x.dtype() == DType::kBF16) {  // inputs already rounded for cuBLAS (CudaBackend::linear_input_dtype)
    check_on_device(ctx, x, "linear input"), check_on_device(ctx, out, "linear output");
    check_on_device(ctx, bias, "linear bias");
    RS_CHECK(w.format == LinearWeight::Format::kDense && !ctx.batch_invariant() && out.dtype() == DType::kF32,
             "linear: bf16 inputs only for dense bf16 weights on the fast path");
    if (tokens == 0 || w.out_features == 0) return;
    ctx.activate();
    cublas_linear(ctx, x, tokens, w, out.data_as<float>());
    if (!bias.empty())
      launch_add_bias(out.data_as<float>(), tokens, w.out_features, bias.data(), elem_type(bias.dtype()), ctx.stream());
    return;
  }
  LinearArgs args = dense_args(ctx, x, w, bias, out);
  if (tokens == 0 || w.out_features == 0) return;
  ctx.activate();
  const WeightFormat format = args.format;
  if (format == WeightFormat::kFp8) return run_fp8_linear(ctx, x, w, bias, args);
  if (format == WeightFormat::kInt4 || format == WeightFormat::kInt8 || format == WeightFormat::kInt4Tiled)
    return run_affine_linear(ctx, x, w, bias, args);
  if (ctx.batch_invariant()) {
    // One kernel whatever the row count: each output is summed over K in the same order (tiles of 64, no split-K) for
    // 1 row or 4,096. The tensor-core GEMM in the fast path; exact mode and f32/f16 weights take the SIMT one.
    const bool mma =
        !ctx.exact_f32() && gemm_mma_supported(format, args.in_features, args.x, args.x_stride, args.w.weight);
    args.rows.chunk_rows = mma ? kMmaRows : kTiledRows;
    mma ? launch_gemm_mma(args, ctx.stream()) : launch_gemm_tiled(args, ctx.stream());
  } else if (gemv_applies(ctx, args)) {
    args.rows.chunk_rows = static_cast<int32_t>(tokens);
    launch_gemv(args, args.rows.chunk_rows, ctx.stream());
  } else if (format == WeightFormat::kF32 || format == WeightFormat::kBF16) {
    cublas_linear(ctx, x, tokens, w, args.out);
    if (!bias.empty()) launch_add_bias(args.out, tokens, w.out_features, bias.data(), args.w.bias_type, ctx.stream());
  } else if (!ctx.exact_f32() && gemm_mma_supported(format, args.in_features, args.x, args.x_stride, args.w.weight)) {
    args.rows.chunk_rows = kMmaRows;  // MXFP4 with many rows (fast path)
    launch_gemm_mma(args, ctx.stream());
  } else {
    args.rows.chunk_rows = kTiledRows;
    launch_gemm_tiled(args, ctx.stream());
  }
}

bool run_linear_silu_mul(DeviceContext& ctx, const Tensor& x, const LinearWeight& gate_up, Tensor out) {
  const int64_t tokens = x.rows(), inter = gate_up.out_features / 2;
  RS_CHECK(
      x.dim(-1) == gate_up.in_features && gate_up.out_features % 2 == 0 && out.dim(-1) == inter && out.rows() == tokens,
      "linear_silu_mul: x {} . W [{}, {}] -> out {}", x.shape_string(), gate_up.out_features, gate_up.in_features,
      out.shape_string());
  // bf16 rows go to cuBLAS; ordered inputs are gathered by run_linear.
  if (x.dtype() != DType::kF32 || !gate_up.input_order.empty()) return false;
  LinearArgs args = dense_args(ctx, x, gate_up, Tensor(), out);
  const bool mma = !ctx.batch_invariant() && tokens <= kGemvMaxRows && int4_mma_rows(ctx, args, tokens) == tokens;
  if (!mma && (ctx.batch_invariant() || !gemv_applies(ctx, args))) return false;  // run_linear, then silu_mul
  if (tokens == 0 || inter == 0) return true;
  ctx.activate();
  args.out_features = inter;
  args.glu_offset = inter;
  args.rows.chunk_rows = static_cast<int32_t>(tokens);
  mma ? launch_gemv_mma(args, args.rows.chunk_rows, ctx.stream())
      : launch_gemv(args, args.rows.chunk_rows, ctx.stream());
  return true;
}

void run_moe_experts(DeviceContext& ctx, const Tensor& x, const Tensor& ids, const Tensor& weights,
                     const MoeWeights& experts, Tensor out, const MoeRouter* router) {
  const int64_t tokens = x.dim(0), hidden = x.dim(1), top_k = ids.dim(1);
  const size_t num_experts = experts.down.size();
  RS_CHECK(experts.first_expert == 0 &&
               (experts.total_experts == 0 || experts.total_experts == static_cast<int32_t>(num_experts)),
           "expert parallelism runs on CPU ranks only for now");
  RS_CHECK(num_experts > 0 && ids.dim(0) == tokens && weights.dim(0) == tokens && weights.dim(1) == top_k &&
               out.dim(0) == tokens && out.dim(1) == hidden,
           "moe_experts: x {} ids {} weights {} out {}", x.shape_string(), ids.shape_string(), weights.shape_string(),
           out.shape_string());
  RS_CHECK(ids.dtype() == DType::kI32 && weights.dtype() == DType::kF32, "moe_experts: ids i32, weights f32");
  for (const Tensor* t : std::initializer_list<const Tensor*>{&x, &ids, &weights, &out})
    check_on_device(ctx, *t, "moe_experts tensor");
  if (tokens == 0) return;
  ctx.activate();
  const bool gpt_oss = experts.activation == MoeActivation::kClampedSwiGlu;
  const int64_t inter = gpt_oss ? experts.gate_up.front().out_features / 2 : experts.gate.front().out_features;
  const WeightFormat down_format = expert_format(experts.down, hidden, inter, num_experts);
  const WeightFormat up_format = gpt_oss ? expert_format(experts.gate_up, 2 * inter, hidden, num_experts)
                                         : expert_format(experts.gate, inter, hidden, num_experts);
  if (!gpt_oss) RS_CHECK(expert_format(experts.up, inter, hidden, num_experts) == up_format, "gate/up formats differ");
  RS_CHECK(up_format != WeightFormat::kFp8 && down_format != WeightFormat::kFp8,
           "FP8 MoE experts reach CUDA's expert kernels through prepare_experts (dequantized at load)");

  const int64_t slots = tokens * top_k;
  // Three paths by rows per expert: the GEMV (few rows: decode), the tensor-core grouped GEMM (the fast path), or the
  // tiled SIMT GEMM (exact mode, or shapes the mma kernel does not take). The GEMV and the mma GEMM apply the gated
  // activation in their epilogue; the tiled path writes gate and up and runs the activation after.
  // GEMV chunks: rows per chunk near twice the mean rows per expert (a power of two up to 8), so that batch-1 decode
  // runs one row per expert and experts that got more rows take a few chunks (their weights then come from L2).
  int32_t gemv_rows = 1;
  while (gemv_rows < kGemvMaxRows && gemv_rows * static_cast<int64_t>(num_experts) < 2 * slots) gemv_rows *= 2;
  const bool gemv_ok = gemv_supported(up_format, hidden, x.data_as<float>(), hidden, nullptr) &&
                       gemv_supported(down_format, inter, nullptr, inter, nullptr);
  const bool mma_ok = !ctx.exact_f32() && gemm_mma_supported(up_format, hidden, x.data_as<float>(), hidden, nullptr) &&
                      gemm_mma_supported(down_format, inter, nullptr, inter, nullptr);
  // Exact mode keeps the f32 GEMV up to 8 rows per chunk. The fast path hands anything past one row per expert to the
  // tensor cores: the GEMV re-reads the activation rows per weight vector (MXFP4 at 8 rows per chunk: 85 ms per
  // gpt-oss step at batch 32, against 24 ms on the tensor cores; at batch 8 with 2 rows per chunk both take ~17 ms).
  const int64_t active = std::min<int64_t>(slots, static_cast<int64_t>(num_experts));
  const bool few_rows = mma_ok ? gemv_rows == 1 : slots <= kGemvMaxRows * active;
  // MXFP4 in the fast path: the tensor-core GEMV (no f32 decode; up to 8 rows per chunk for the cost of one) while the
  // mean rows per expert stay <= 4, so that few experts need a second chunk.
  const bool gemv_mma_ok = mma_ok && 2 * slots <= kGemvMaxRows * static_cast<int64_t>(num_experts) &&
                           gemv_mma_supported(up_format, hidden, x.data_as<float>(), hidden, gemv_rows) &&
                           gemv_mma_supported(down_format, inter, x.data_as<float>(), inter, gemv_rows);
  // Batch-invariant: the grouped GEMM whatever the rows per expert (a row's sums do not depend on its chunk).
  const bool invariant = ctx.batch_invariant();
  const MoePath path = invariant             ? (mma_ok ? MoePath::kMma : MoePath::kTiled)
                       : gemv_mma_ok         ? MoePath::kGemvMma
                       : gemv_ok && few_rows ? MoePath::kGemv
                       : mma_ok              ? MoePath::kMma
                                             : MoePath::kTiled;
  const int32_t chunk_rows = path == MoePath::kGemv || path == MoePath::kGemvMma ? gemv_rows
                             : path == MoePath::kMma                             ? kMmaRows
                                                                                 : kTiledRows;
  const int64_t max_chunks = std::min(slots, ceil_div(slots, chunk_rows) + static_cast<int64_t>(num_experts));
  RS_CHECK(max_chunks <= 65535, "MoE batch of {} slots needs {} chunks (grid limit)", slots, max_chunks);
  auto* act = static_cast<float*>(ctx.scratch(ScratchSlot::kMoeAct, slots * inter * sizeof(float)));
  auto* y = static_cast<float*>(ctx.scratch(ScratchSlot::kMoeOut, slots * hidden * sizeof(float)));

  // Scratch: pos_of_slot [slots] | x_row_of_pos [slots] | num_chunks, padded to 16 bytes | chunks [max_chunks].
  const size_t ints = static_cast<size_t>(2 * slots + 4);
  auto* meta = static_cast<int32_t*>(ctx.scratch(ScratchSlot::kMoeMeta, ints * 4 + max_chunks * sizeof(int4) + 16));
  int32_t* pos_of_slot = meta;
  int32_t* x_row_of_pos = meta + slots;
  int32_t* num_chunks = meta + 2 * slots;
  auto* chunks = reinterpret_cast<int4*>(meta + ((ints + 3) & ~size_t{3}));
  if (router)
    RS_CHECK(router->num_experts == static_cast<int32_t>(num_experts), "moe: {} router logits, {} experts",
             router->num_experts, num_experts);
  if (router && moe_route_sort_fusable(tokens, router->num_experts)) {
    launch_moe_route_sort(router->logits, tokens, router->num_experts, static_cast<int32_t>(top_k),
                          router->softmax_first, router->renormalize, ids.data_as<int32_t>(), weights.data_as<float>(),
                          chunk_rows, pos_of_slot, x_row_of_pos, chunks, num_chunks, ctx.error_flags(), ctx.stream());
  } else {
    if (router)
      launch_moe_route(router->logits, tokens, router->num_experts, static_cast<int32_t>(top_k), router->softmax_first,
                       router->renormalize, ids.data_as<int32_t>(), weights.data_as<float>(), ctx.stream());
    launch_moe_sort(ids.data_as<int32_t>(), slots, static_cast<int32_t>(top_k), static_cast<int32_t>(num_experts),
                    chunk_rows, pos_of_slot, x_row_of_pos, chunks, num_chunks, ctx.error_flags(), ctx.stream());
  }
  const RowChunks rows{chunks, num_chunks, static_cast<int32_t>(max_chunks), chunk_rows, slots};
  const auto run = [&](const LinearArgs& args) {
    switch (path) {
      case MoePath::kGemv: return launch_gemv(args, chunk_rows, ctx.stream());
      case MoePath::kGemvMma: return launch_gemv_mma(args, chunk_rows, ctx.stream());
      case MoePath::kMma: return launch_gemm_mma(args, ctx.stream());
      case MoePath::kTiled: return launch_gemm_tiled(args, ctx.stream());
    }
  };

  LinearArgs up{};
  up.x = x.data_as<float>();
  up.x_stride = hidden;
  up.x_rows = x_row_of_pos;
  up.in_features = hidden;
  up.format = up_format;
  up.rows = rows;
  const auto bind = [&](GroupedWeights& w, const std::vector<LinearWeight>& list) {
    const ExpertTable table = ctx.expert_table(list);
    w.weight_table = table.weights;
    w.scale_table = table.scales;
  };
  if (path != MoePath::kTiled) {  // gated pairs in the epilogue: up -> act [slots, inter] directly
    up.out = act;
    up.out_stride = inter;
    up.out_features = inter;
    if (gpt_oss) {
      bind(up.w, experts.gate_up);
      set_bias(up.w, experts.gate_up_bias, 2 * inter);
      up.pair_act = PairActivation::kClampedSwiGlu;
      up.swiglu_alpha = experts.swiglu_alpha;
      up.swiglu_limit = experts.swiglu_limit;
    } else {
      bind(up.w, experts.gate);
      GroupedWeights up_w{};
      bind(up_w, experts.up);
      up.w.up_table = up_w.weight_table;
      up.w.up_scale_table = up_w.scale_table;
      up.pair_act = PairActivation::kSilu;
    }
    run(up);
  } else {
    auto* hidden_act = static_cast<float*>(ctx.scratch(ScratchSlot::kMoeHidden, slots * 2 * inter * sizeof(float)));
    up.out_stride = 2 * inter;
    if (gpt_oss) {
      up.out = hidden_act;
      up.out_features = 2 * inter;
      bind(up.w, experts.gate_up);
      set_bias(up.w, experts.gate_up_bias, 2 * inter);
      run(up);
      launch_clamped_swiglu(hidden_act, slots, inter, experts.swiglu_alpha, experts.swiglu_limit, act, ctx.stream());
    } else {
      up.out_features = inter;
      up.out = hidden_act;  // gate into columns [0, I)
      bind(up.w, experts.gate);
      run(up);
      up.out = hidden_act + inter;  // up into columns [I, 2I)
      bind(up.w, experts.up);
      run(up);
      launch_silu_mul(hidden_act, slots, inter, act, false, ctx.stream());
    }
  }
  LinearArgs down{};
  down.x = act;
  down.x_stride = inter;
  down.out = y;
  down.out_stride = hidden;
  down.in_features = inter;
  down.out_features = hidden;
  down.format = down_format;
  down.rows = rows;
  bind(down.w, experts.down);
  set_bias(down.w, experts.down_bias, hidden);
  run(down);
  launch_moe_combine(y, ids.data_as<int32_t>(), weights.data_as<float>(), pos_of_slot, tokens,
                     static_cast<int32_t>(top_k), hidden, out.data_as<float>(), ctx.stream());
}

}  // namespace rs::cuda
