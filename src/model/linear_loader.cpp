#include "model/linear_loader.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "base/thread_pool.h"

namespace rs::model {

float load_float(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::kF32: return t.data_as<float>()[i];
    case DType::kBF16: return bf16_to_f32(t.data_as<uint16_t>()[i]);
    case DType::kF16: return f16_to_f32(t.data_as<uint16_t>()[i]);
    default: RS_FAIL("expected a float tensor, got {}", dtype_name(t.dtype()));
  }
}

namespace {

// The block edge b with ceil(extent / b) == count: one scale over the whole extent or one per element first (the
// canonical per-tensor / per-channel forms), then the configured block, 128, and an exact division.
int64_t block_edge(int64_t extent, int64_t count, int64_t configured) {
  if (count == 1) return extent;
  if (count == extent) return 1;
  const auto fits = [&](int64_t b) { return b > 0 && (extent + b - 1) / b == count; };
  for (int64_t b : {configured, int64_t{128}}) {
    if (fits(b)) return b;
  }
  if (extent % count == 0) return extent / count;
  return 0;
}

bool is_fp8(const LinearWeight& w) { return w.format == LinearWeight::Format::kFp8; }
bool is_affine(const LinearWeight& w) { return w.format == LinearWeight::Format::kAffine; }
bool has_scales(const LinearWeight& w) { return is_fp8(w) || is_affine(w); }

// Two weights of the same storage (format, dtype, and for integers the same bits and group).
bool same_storage(const LinearWeight& a, const LinearWeight& b) {
  const auto same_order = [&] {
    return a.input_order.numel() == b.input_order.numel() &&
           (a.input_order.empty() ||
            std::memcmp(a.input_order.data(), b.input_order.data(), a.input_order.bytes()) == 0);
  };
  return a.format == b.format && a.weight.dtype() == b.weight.dtype() && a.bits == b.bits &&
         (!is_affine(a) || a.scale_block_cols == b.scale_block_cols) && same_order();
}

}  // namespace

Tensor LinearLoader::keep(Buffer buffer, DType dtype, std::vector<int64_t> shape) {
  owned_.push_back(std::move(buffer));
  return Tensor(owned_.back().data(), dtype, shape.data(), static_cast<int>(shape.size()));
}

ThreadPool& LinearLoader::pool() {
  if (!pool_) pool_ = std::make_shared<ThreadPool>(hardware_threads());  // billions of values in a large model
  return *pool_;
}

LinearWeight LinearLoader::load(const std::string& module, int64_t out, int64_t in, bool quantizable) {
  const std::string name = module + ".weight";
  if (weights_.contains(module + ".qweight")) {
    RS_CHECK(quantization_.method == loader::QuantMethod::kAwq || quantization_.method == loader::QuantMethod::kGptq,
             "'{}.qweight' is an AWQ/GPTQ tensor but config.json declares no awq or gptq quantization_config", module);
    return quantization_.method == loader::QuantMethod::kAwq ? load_awq(module, out, in) : load_gptq(module, out, in);
  }
  const auto info = weights_.info(name);
  if (info && info->dtype == DType::kF8E4M3)
    return load_fp8(module, weights_.require(name, {out, in}, DType::kF8E4M3), out, in);
  if (info && info->dtype == DType::kU32) return load_mlx(module, TensorSlice{}, out, in);
  const Tensor weight = weights_.require(name, {out, in});
  // Dummy weights of an FP8 or integer config (a configs/ folder) are quantized as they load, to time the format.
  if (weights_.is_dummy() && quantization_.is_fp8() && quantizable) {
    const bool blocks = quantization_.block_rows > 0 && quantization_.block_cols > 0;
    return quantize_fp8(weight, name, blocks ? quantization_.block_rows : 1, blocks ? quantization_.block_cols : in);
  }
  // mlx_lm quantizes every linear (the LM head and routers too); AWQ and GPTQ leave those as stored.
  const bool mlx = quantization_.method == loader::QuantMethod::kMlxAffine;
  if (weights_.is_dummy() && quantization_.is_integer() && (quantizable || mlx) && in % quantization_.group_size == 0)
    return quantize_affine(weight, name, quantization_.bits, quantization_.group_size);
  return from_dense(weight, quantizable, name);
}

std::optional<LinearWeight> LinearLoader::load_expert(const std::string& module, int64_t index, int64_t count,
                                                      int64_t out, int64_t in) {
  const std::string name = module + ".weight";
  const auto info = weights_.info(name);
  if (!info) return std::nullopt;
  if (info->dtype == DType::kU32) return load_mlx(module, TensorSlice{count, index}, out, in);
  RS_CHECK(index < count, "expert {} of {} in '{}'", index, count, name);
  const Tensor stack = weights_.require(name, {count, out, in});
  const size_t bytes = static_cast<size_t>(out * in) * dtype_size(stack.dtype());
  return from_dense(Tensor(static_cast<char*>(stack.data()) + index * bytes, stack.dtype(), {out, in}));
}

LinearWeight LinearLoader::embedding(const std::string& module, int64_t rows, int64_t width) {
  const auto info = weights_.info(module + ".weight");
  if (info && info->dtype == DType::kU32) return load_mlx(module, TensorSlice{}, rows, width);
  const Tensor table = weights_.require(module + ".weight", {rows, width});
  return LinearWeight{LinearWeight::Format::kDense, table, Tensor(), rows, width};
}

LinearWeight LinearLoader::from_dense(const Tensor& weight, bool quantizable, const std::string& name) {
  RS_CHECK(weight.ndim() == 2, "linear weight {} must be 2-D", weight.shape_string());
  if (quantization_.fp8_on_load && quantizable) return quantize_fp8(weight, name, 1, weight.dim(1));
  return LinearWeight{LinearWeight::Format::kDense, weight, Tensor(), weight.dim(0), weight.dim(1)};
}

LinearWeight LinearLoader::load_fp8(const std::string& module, const Tensor& weight, int64_t out, int64_t in) {
  // Fine-grained FP8 (transformers, Qwen, DeepSeek) names the multiplier weight_scale_inv; compressed-tensors
  // weight_scale. Either way w = fp8 * scale. A static input_scale only matters to W8A8 kernels that quantize
  // activations per tensor; W8A16 and the reference path read activations as they are.
  std::string scale_name = module + ".weight_scale_inv";
  if (!weights_.contains(scale_name)) scale_name = module + ".weight_scale";
  const auto info = weights_.info(scale_name);
  RS_CHECK(info.has_value(), "FP8 weight '{}.weight' has no weight_scale_inv or weight_scale beside it", module);
  int64_t count = 1;
  for (int64_t d : info->shape) count *= d;
  RS_CHECK(count > 0, "'{}' holds no scales", scale_name);
  const Tensor stored = weights_.require(scale_name, info->shape);
  // Scales as [rows, cols] of blocks: a scalar or [1] is per tensor, [out] or [out, 1] per channel.
  const int64_t rows = count == 1 ? 1 : info->shape[0];
  const int64_t cols = count == 1 ? 1 : count / rows;
  const int64_t block_rows = block_edge(out, rows, quantization_.block_rows);
  const int64_t block_cols = block_edge(in, cols, quantization_.block_cols);
  RS_CHECK(block_rows > 0 && block_cols > 0,
           "'{}' has shape [{}, {}] of scales for a [{}, {}] FP8 weight: not a block grid", scale_name, rows, cols, out,
           in);
  Buffer buffer = Buffer::host(count * sizeof(float));
  for (int64_t i = 0; i < count; ++i) static_cast<float*>(buffer.data())[i] = load_float(stored, i);
  LinearWeight w{LinearWeight::Format::kFp8, weight, keep(std::move(buffer), DType::kF32, {rows, cols}), out, in};
  w.scale_block_rows = block_rows;
  w.scale_block_cols = block_cols;
  return w;
}

LinearWeight LinearLoader::quantize_fp8(const Tensor& weight, const std::string& name, int64_t block_rows,
                                        int64_t block_cols) {
  // One scale per [block_rows, block_cols] block, amax / 448, codes rounded to nearest even: per output channel
  // ([1, in]) as vLLM's and llm-compressor's FP8_DYNAMIC weights, or the checkpoint's blocks for dummy weights of an
  // FP8 config.
  const int64_t out = weight.dim(0), in = weight.dim(1);
  block_rows = std::min(block_rows, out), block_cols = std::min(block_cols, in);
  const int64_t grid_rows = (out + block_rows - 1) / block_rows, grid_cols = (in + block_cols - 1) / block_cols;
  Buffer codes = Buffer::host(out * in);
  Buffer scales = Buffer::host(grid_rows * grid_cols * sizeof(float));
  uint8_t* q = static_cast<uint8_t*>(codes.data());
  float* s = static_cast<float*>(scales.data());
  pool().parallel_for(grid_rows, [&](int64_t begin, int64_t end) {
    std::vector<float> rows(block_rows * in);
    for (int64_t br = begin; br < end; ++br) {
      const int64_t r0 = br * block_rows, r1 = std::min(out, r0 + block_rows);
      for (int64_t i = 0; i < (r1 - r0) * in; ++i) rows[i] = load_float(weight, r0 * in + i);
      for (int64_t bc = 0; bc < grid_cols; ++bc) {
        const int64_t c0 = bc * block_cols, c1 = std::min(in, c0 + block_cols);
        float amax = 0.0f;
        for (int64_t r = 0; r < r1 - r0; ++r)
          for (int64_t c = c0; c < c1; ++c) amax = std::max(amax, std::fabs(rows[r * in + c]));
        const float scale = amax > 0.0f ? amax / kFp8E4M3Max : 1.0f;
        s[br * grid_cols + bc] = scale;
        for (int64_t r = 0; r < r1 - r0; ++r)
          for (int64_t c = c0; c < c1; ++c) q[(r0 + r) * in + c] = f32_to_fp8_e4m3(rows[r * in + c] / scale);
      }
    }
  });
  LinearWeight w{LinearWeight::Format::kFp8, keep(std::move(codes), DType::kF8E4M3, {out, in}),
                 keep(std::move(scales), DType::kF32, {grid_rows, grid_cols}), out, in};
  w.scale_block_rows = block_rows;
  w.scale_block_cols = block_cols;
  if (!name.empty()) weights_.note_stored_as(name, w.weight.bytes() + w.scales.bytes());
  return w;
}

LinearWeight LinearLoader::fp8_row_scales(const LinearWeight& w) {
  if (w.scale_block_rows == 1) return w;
  const int64_t cols = w.scales.dim(1);
  Buffer buffer = Buffer::host(w.out_features * cols * sizeof(float));
  float* dst = static_cast<float*>(buffer.data());
  for (int64_t r = 0; r < w.out_features; ++r)
    std::memcpy(dst + r * cols, w.scales.data_as<float>() + (r / w.scale_block_rows) * cols, cols * sizeof(float));
  LinearWeight rows = w;
  rows.scales = keep(std::move(buffer), DType::kF32, {w.out_features, cols});
  rows.scale_block_rows = 1;
  return rows;
}

LinearWeight LinearLoader::stack_rows(std::span<const LinearWeight> parts) {
  RS_CHECK(!parts.empty(), "stack_rows of no weights");
  const LinearWeight& first = parts.front();
  RS_CHECK(first.format != LinearWeight::Format::kMxfp4, "MXFP4 weights cannot be fused");
  bool uniform = true;
  for (const LinearWeight& p : parts) {
    RS_CHECK(p.in_features == first.in_features, "cannot fuse weights {} and {} of different widths",
             first.weight.shape_string(), p.weight.shape_string());
    uniform = uniform && same_storage(p, first);
  }
  if (!uniform) {
    // Integer parts of different bits or groups (GGUF's Q4_K_M stores v_proj in Q6_K beside Q4_K q/k; MLX's mixed
    // recipes) widen exactly to the most bits and the finest group of any part, with one input order.
    const bool integer = std::all_of(parts.begin(), parts.end(), [&](const LinearWeight& p) {
      return is_affine(p) && p.input_order.numel() == first.input_order.numel() &&
             (p.input_order.empty() ||
              std::memcmp(p.input_order.data(), first.input_order.data(), p.input_order.bytes()) == 0);
    });
    if (integer) {
      int bits = 0;
      int64_t group = 0;
      for (const LinearWeight& p : parts) {
        bits = std::max(bits, p.bits);
        group = std::gcd(group, p.scale_block_cols);
      }
      std::vector<LinearWeight> widened;
      for (const LinearWeight& p : parts) widened.push_back(widen_affine(p, bits, group));
      return stack_rows(widened);
    }
    // Otherwise (MLX modules left unquantized beside quantized ones) the fused parts become exact f32, correct but as
    // wide as f32.
    for (const LinearWeight& p : parts)
      RS_CHECK(p.format == LinearWeight::Format::kDense || is_affine(p),
               "cannot fuse FP8 weights with weights of another format or scale shape");
    std::vector<LinearWeight> wide;
    for (const LinearWeight& p : parts)
      wide.push_back(LinearWeight{LinearWeight::Format::kDense, dequantize_to_f32(p, owned_), Tensor(), p.out_features,
                                  p.in_features});
    return stack_rows(wide);
  }
  int64_t rows = 0;
  size_t bytes = 0;
  bool same_blocks = true;
  for (size_t i = 0; i < parts.size(); ++i) {
    const LinearWeight& p = parts[i];
    rows += p.out_features;
    bytes += p.weight.bytes();
    if (is_fp8(p)) {
      RS_CHECK(p.scale_block_cols == first.scale_block_cols, "cannot fuse FP8 weights with scale blocks {} and {} wide",
               first.scale_block_cols, p.scale_block_cols);
      // Blocks stack where no block straddles two parts: every part but the last fills whole blocks.
      same_blocks = same_blocks && p.scale_block_rows == first.scale_block_rows &&
                    (i + 1 == parts.size() || p.out_features % p.scale_block_rows == 0);
    }
  }
  Buffer buffer = Buffer::host(bytes);
  char* cursor = static_cast<char*>(buffer.data());
  for (const LinearWeight& p : parts) {
    std::memcpy(cursor, p.weight.data(), p.weight.bytes());
    cursor += p.weight.bytes();
  }
  LinearWeight fused = first;
  fused.weight = keep(std::move(buffer), first.weight.dtype(), {rows, first.weight.dim(1)});
  fused.out_features = rows;
  fused.packed = Tensor();
  fused.packed_rows = Tensor();
  if (!has_scales(first)) return fused;
  std::vector<LinearWeight> scaled;
  for (const LinearWeight& p : parts) scaled.push_back(same_blocks || is_affine(p) ? p : fp8_row_scales(p));
  // Scales stack as their rows (integer groups and FP8 row scales are per row; FP8 blocks only where none straddles).
  std::vector<int64_t> shape;
  for (int axis = 0; axis < scaled.front().scales.ndim(); ++axis) shape.push_back(scaled.front().scales.dim(axis));
  shape[0] = 0;
  for (const LinearWeight& p : scaled) shape[0] += p.scales.dim(0);
  size_t scale_bytes = 0;
  for (const LinearWeight& p : scaled) scale_bytes += p.scales.bytes();
  Buffer scales = Buffer::host(scale_bytes);
  cursor = static_cast<char*>(scales.data());
  for (const LinearWeight& p : scaled) {
    std::memcpy(cursor, p.scales.data(), p.scales.bytes());
    cursor += p.scales.bytes();
  }
  fused.scales = keep(std::move(scales), DType::kF32, shape);
  fused.scale_block_rows = scaled.front().scale_block_rows;
  return fused;
}

LinearWeight LinearLoader::select_rows(const LinearWeight& w, const std::vector<int64_t>& rows) {
  RS_CHECK(w.format != LinearWeight::Format::kMxfp4, "MXFP4 weights cannot be split by rows");
  const LinearWeight source = is_fp8(w) ? fp8_row_scales(w) : w;
  const size_t row_bytes = source.weight.bytes() / source.out_features;
  const int64_t count = static_cast<int64_t>(rows.size());
  Buffer buffer = Buffer::host(count * row_bytes);
  for (int64_t r = 0; r < count; ++r) {
    RS_CHECK(rows[r] >= 0 && rows[r] < source.out_features, "row {} of a {} weight", rows[r],
             source.weight.shape_string());
    std::memcpy(static_cast<char*>(buffer.data()) + r * row_bytes,
                static_cast<const char*>(source.weight.data()) + rows[r] * row_bytes, row_bytes);
  }
  LinearWeight picked = source;
  picked.weight = keep(std::move(buffer), source.weight.dtype(), {count, source.weight.dim(1)});
  picked.out_features = count;
  picked.packed = Tensor();
  picked.packed_rows = Tensor();
  if (!has_scales(source)) return picked;
  // Per-row scales (FP8 after fp8_row_scales, integer groups): pick the same rows.
  const size_t scale_row_bytes = source.scales.bytes() / source.scales.dim(0);
  Buffer scales = Buffer::host(count * scale_row_bytes);
  for (int64_t r = 0; r < count; ++r)
    std::memcpy(static_cast<char*>(scales.data()) + r * scale_row_bytes,
                static_cast<const char*>(source.scales.data()) + rows[r] * scale_row_bytes, scale_row_bytes);
  std::vector<int64_t> shape;
  for (int axis = 0; axis < source.scales.ndim(); ++axis) shape.push_back(source.scales.dim(axis));
  shape[0] = count;
  picked.scales = keep(std::move(scales), DType::kF32, shape);
  return picked;
}

}  // namespace rs::model
