// LinearLoader's integer formats: MLX affine, AWQ and GPTQ checkpoints become one kind, LinearWeight::kAffine (codes
// packed along `in`, an f32 (scale, bias) pair per group), so backends read one layout whatever wrote the file.
#include <algorithm>
#include <cstring>

#include "base/thread_pool.h"
#include "model/linear_loader.h"

namespace rs::model {
namespace {

// Bits b of element i of a little-endian stream of b-bit codes.
inline uint32_t code_at(const uint8_t* row, int64_t i, int bits) {
  if (bits == 8) return row[i];
  const int64_t bit = i * bits;
  return (row[bit >> 3] >> (bit & 7)) & ((1u << bits) - 1);
}
// Element i of a little-endian bit stream of b-bit codes, for any b <= 8 (a code may straddle two bytes).
inline uint32_t stream_code(const uint8_t* row, int64_t i, int bits) {
  const int64_t bit = i * bits;
  const int shift = static_cast<int>(bit & 7);
  uint32_t window = row[bit >> 3];
  if (shift + bits > 8) window |= static_cast<uint32_t>(row[(bit >> 3) + 1]) << 8;
  return (window >> shift) & ((1u << bits) - 1);
}
inline void set_code(uint8_t* row, int64_t i, int bits, uint32_t value) {
  const int64_t bit = i * bits;
  row[bit >> 3] = static_cast<uint8_t>(row[bit >> 3] | (value << (bit & 7)));
}

// AutoAWQ packs columns 8c + {0, 2, 4, 6, 1, 3, 5, 7} into nibbles 0..7 of word c: column 8c + j is nibble
// kAwqNibble[j].
constexpr int kAwqNibble[8] = {0, 4, 1, 5, 2, 6, 3, 7};

}  // namespace

LinearWeight LinearLoader::affine(Tensor codes, Tensor pairs, int64_t out, int64_t in, int bits, int64_t group) {
  LinearWeight w{LinearWeight::Format::kAffine, codes, pairs, out, in};
  w.scale_block_rows = 1;
  w.scale_block_cols = group;
  w.bits = bits;
  return w;
}

LinearWeight LinearLoader::load_mlx(const std::string& module, const TensorSlice& slice, int64_t out, int64_t in) {
  // weight U32 [..., out, in * bits / 32], scales and biases [..., out, in / group] in the model's float type.
  const std::string name = module + ".weight";
  const auto info = weights_.info(name);
  const int64_t words = info->shape.back();
  RS_CHECK(words > 0 && (words * 32) % in == 0, "'{}' holds {} words per row for {} inputs", name, words, in);
  const int bits = static_cast<int>(words * 32 / in);
  RS_CHECK(bits >= 2 && bits <= 8 && bits != 7, "'{}' is {}-bit MLX: supported are 2, 3, 4, 5, 6 and 8 bits", name,
           bits);
  const auto scale_info = weights_.info(module + ".scales");
  RS_CHECK(scale_info && weights_.contains(module + ".biases"), "MLX weight '{}' has no scales and biases beside it",
           name);
  const int64_t groups = scale_info->shape.back();
  RS_CHECK(groups > 0 && in % groups == 0 && (in / groups) % 8 == 0, "'{}.scales' has {} groups for {} inputs", module,
           groups, in);
  const int64_t group = in / groups;
  std::vector<int64_t> shape = slice.stack ? std::vector<int64_t>{slice.stack, out, words} : std::vector{out, words};
  const Tensor packed = weights_.require(name, shape, DType::kU32);
  shape.back() = groups;
  const Tensor scales = weights_.require(module + ".scales", shape);
  const Tensor biases = weights_.require(module + ".biases", shape);
  RS_CHECK(slice.index < std::max<int64_t>(slice.stack, 1), "expert {} of {} in '{}'", slice.index, slice.stack, name);
  // One expert of a stacked [E, out, ...] tensor is a view at its offset (u32 words read as little-endian bytes).
  const int64_t row_bytes = words * 4, first = slice.index * out;
  Tensor codes(static_cast<uint8_t*>(packed.data()) + first * row_bytes, DType::kU8, {out, row_bytes});
  if (bits != 2 && bits != 4 && bits != 8) {
    // 3, 5 and 6 bits: each row one little-endian bit stream (element j at bit j * bits), widened to a byte per code.
    Buffer wide = Buffer::host(out * in);
    const auto* src = codes.data_as<uint8_t>();
    auto* dst = static_cast<uint8_t*>(wide.data());
    for (int64_t o = 0; o < out; ++o)
      for (int64_t i = 0; i < in; ++i)
        dst[o * in + i] = static_cast<uint8_t>(stream_code(src + o * row_bytes, i, bits));
    codes = keep(std::move(wide), DType::kU8, {out, in});
  }
  Buffer pairs = Buffer::host(out * groups * 2 * sizeof(float));
  float* p = static_cast<float*>(pairs.data());
  for (int64_t i = 0; i < out * groups; ++i) {
    p[2 * i] = load_float(scales, first * groups + i);
    p[2 * i + 1] = load_float(biases, first * groups + i);
  }
  const int stored_bits = bits == 2 || bits == 4 ? bits : 8;
  return affine(codes, keep(std::move(pairs), DType::kF32, {out, groups, 2}), out, in, stored_bits, group);
}

LinearWeight LinearLoader::widen_affine(const LinearWeight& w, int bits, int64_t group) {
  if (w.bits == bits && w.scale_block_cols == group) return w;
  RS_CHECK(bits >= w.bits && group > 0 && w.scale_block_cols % group == 0 && w.in_features % group == 0,
           "cannot widen {}-bit groups of {} to {}-bit groups of {}", w.bits, w.scale_block_cols, bits, group);
  const int64_t out = w.out_features, in = w.in_features, groups = in / group, split = w.scale_block_cols / group;
  const int64_t old_row = w.weight.dim(1), new_row = in * bits / 8;
  Buffer codes = Buffer::host(out * new_row);
  Buffer pairs = Buffer::host(out * groups * 2 * sizeof(float));
  std::memset(codes.data(), 0, codes.bytes());
  const auto* src = w.weight.data_as<uint8_t>();
  const float* src_pairs = w.scales.data_as<float>();
  auto* dst = static_cast<uint8_t*>(codes.data());
  auto* dst_pairs = static_cast<float*>(pairs.data());
  for (int64_t o = 0; o < out; ++o) {
    for (int64_t i = 0; i < in; ++i) set_code(dst + o * new_row, i, bits, code_at(src + o * old_row, i, w.bits));
    for (int64_t g = 0; g < groups; ++g) {
      dst_pairs[(o * groups + g) * 2] = src_pairs[(o * (groups / split) + g / split) * 2];
      dst_pairs[(o * groups + g) * 2 + 1] = src_pairs[(o * (groups / split) + g / split) * 2 + 1];
    }
  }
  LinearWeight wide = affine(keep(std::move(codes), DType::kU8, {out, new_row}),
                             keep(std::move(pairs), DType::kF32, {out, groups, 2}), out, in, bits, group);
  wide.input_order = w.input_order;
  return wide;
}

LinearWeight LinearLoader::load_awq(const std::string& module, int64_t out, int64_t in) {
  // qweight I32 [in, out/8], qzeros I32 [in/group, out/8], scales F16 [in/group, out]; w = (q - zero) * scale.
  RS_CHECK(out % 8 == 0, "AWQ module '{}' has {} outputs, not a multiple of 8", module, out);
  const auto scale_info = weights_.info(module + ".scales");
  RS_CHECK(scale_info && scale_info->shape.size() == 2, "AWQ module '{}' has no 2-D scales", module);
  const int64_t groups = scale_info->shape[0], group = groups > 0 ? in / groups : 0;
  RS_CHECK(groups > 0 && in % groups == 0 && group % 2 == 0, "'{}.scales' has {} groups for {} inputs", module, groups,
           in);
  const uint32_t* qweight = weights_.require(module + ".qweight", {in, out / 8}, DType::kI32).data_as<uint32_t>();
  const uint32_t* qzeros = weights_.require(module + ".qzeros", {groups, out / 8}, DType::kI32).data_as<uint32_t>();
  const Tensor scales = weights_.require(module + ".scales", {groups, out});
  Buffer codes = Buffer::host(out * in / 2);
  Buffer pairs = Buffer::host(out * groups * 2 * sizeof(float));
  uint8_t* c = static_cast<uint8_t*>(codes.data());
  float* p = static_cast<float*>(pairs.data());
  pool().parallel_for(out / 8, [&](int64_t begin, int64_t end) {  // a block of 8 columns is 8 whole output rows
    for (int64_t word = begin; word < end; ++word)
      for (int j = 0; j < 8; ++j) {
        const int64_t o = 8 * word + j;
        const int shift = 4 * kAwqNibble[j];
        uint8_t* row = c + o * in / 2;
        for (int64_t i = 0; i < in; ++i) set_code(row, i, 4, (qweight[i * (out / 8) + word] >> shift) & 15);
        for (int64_t g = 0; g < groups; ++g) {
          const float scale = load_float(scales, g * out + o);
          const auto zero = static_cast<float>((qzeros[g * (out / 8) + word] >> shift) & 15);
          p[(o * groups + g) * 2] = scale;
          p[(o * groups + g) * 2 + 1] = -scale * zero;
        }
      }
  });
  return affine(keep(std::move(codes), DType::kU8, {out, in / 2}),
                keep(std::move(pairs), DType::kF32, {out, groups, 2}), out, in, 4, group);
}

LinearWeight LinearLoader::load_gptq(const std::string& module, int64_t out, int64_t in) {
  // qweight I32 [in * bits/32, out] packed along `in`; qzeros I32 [groups, out * bits/32] packed along `out`;
  // scales [groups, out]; g_idx [in]. w = (q - zero) * scale, zero stored minus one in the v1 format.
  const int bits = quantization_.bits;
  const int64_t pack = 32 / bits;
  RS_CHECK(in % pack == 0 && out % pack == 0, "GPTQ module '{}' [{}, {}] is not a whole number of {}-bit words", module,
           out, in, bits);
  const auto scale_info = weights_.info(module + ".scales");
  RS_CHECK(scale_info && scale_info->shape.size() == 2, "GPTQ module '{}' has no 2-D scales", module);
  const int64_t groups = scale_info->shape[0], group = groups > 0 ? in / groups : 0;
  RS_CHECK(groups > 0 && in % groups == 0 && group % pack == 0, "'{}.scales' has {} groups for {} inputs", module,
           groups, in);
  // Act-order checkpoints (desc_act) give input i the group g_idx[i]. Sorting the inputs by group makes the groups
  // contiguous: the weight's columns are stored in that order and the layer gathers its inputs so (input_order).
  std::vector<int32_t> order;
  if (weights_.contains(module + ".g_idx")) {
    const int32_t* g_idx = weights_.require(module + ".g_idx", {in}, DType::kI32).data_as<int32_t>();
    std::vector<int64_t> members(groups, 0);
    bool contiguous = true;
    for (int64_t i = 0; i < in; ++i) {
      RS_CHECK(g_idx[i] >= 0 && g_idx[i] < groups, "'{}.g_idx' names group {} of {}", module, g_idx[i], groups);
      ++members[g_idx[i]];
      contiguous = contiguous && g_idx[i] == i / group;
    }
    for (int64_t g = 0; g < groups; ++g)
      RS_CHECK(members[g] == group, "'{}.g_idx' gives group {} {} inputs, not {}", module, g, members[g], group);
    if (!contiguous) {
      order.resize(in);
      for (int64_t i = 0; i < in; ++i) order[i] = static_cast<int32_t>(i);
      std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return g_idx[a] < g_idx[b]; });
    }
  }
  const uint32_t* qweight = weights_.require(module + ".qweight", {in / pack, out}, DType::kI32).data_as<uint32_t>();
  const uint32_t* qzeros = weights_.require(module + ".qzeros", {groups, out / pack}, DType::kI32).data_as<uint32_t>();
  const Tensor scales = weights_.require(module + ".scales", {groups, out});
  const uint32_t mask = (1u << bits) - 1;
  const float zero_offset = quantization_.gptq_zero_minus_one ? 1.0f : 0.0f;
  const int64_t row_bytes = in * bits / 8;
  Buffer codes = Buffer::host(out * row_bytes);
  Buffer pairs = Buffer::host(out * groups * 2 * sizeof(float));
  uint8_t* c = static_cast<uint8_t*>(codes.data());
  float* p = static_cast<float*>(pairs.data());
  pool().parallel_for(out, [&](int64_t begin, int64_t end) {
    for (int64_t o = begin; o < end; ++o) {
      uint8_t* row = c + o * row_bytes;
      for (int64_t j = 0; j < in; ++j) {
        const int64_t i = order.empty() ? j : order[j];  // column j holds input i
        set_code(row, j, bits, (qweight[(i / pack) * out + o] >> ((i % pack) * bits)) & mask);
      }
      for (int64_t g = 0; g < groups; ++g) {
        const float scale = load_float(scales, g * out + o);
        const float zero =
            static_cast<float>((qzeros[g * (out / pack) + o / pack] >> ((o % pack) * bits)) & mask) + zero_offset;
        p[(o * groups + g) * 2] = scale;
        p[(o * groups + g) * 2 + 1] = -scale * zero;
      }
    }
  });
  LinearWeight w = affine(keep(std::move(codes), DType::kU8, {out, row_bytes}),
                          keep(std::move(pairs), DType::kF32, {out, groups, 2}), out, in, bits, group);
  if (!order.empty()) {
    Buffer buffer = Buffer::host(in * sizeof(int32_t));
    std::memcpy(buffer.data(), order.data(), in * sizeof(int32_t));
    w.input_order = keep(std::move(buffer), DType::kI32, {in});
  }
  return w;
}

LinearWeight LinearLoader::quantize_affine(const Tensor& weight, const std::string& name, int bits, int64_t group) {
  // MLX's rule: per group, scale = (max - min) / (2^bits - 1), bias = min, q = round((w - bias) / scale). Used for
  // dummy weights of an integer config (timing the format), never for a checkpoint's own values.
  // 3, 5 and 6 bits keep their levels in byte codes, as loaded checkpoints of those widths are.
  const int stored = bits == 2 || bits == 4 || bits == 8 ? bits : 8;
  const int64_t out = weight.dim(0), in = weight.dim(1), groups = in / group, row_bytes = in * stored / 8;
  RS_CHECK(in % group == 0, "{} inputs are not whole groups of {}", in, group);
  const float levels = static_cast<float>((1 << bits) - 1);
  Buffer codes = Buffer::host(out * row_bytes);
  Buffer pairs = Buffer::host(out * groups * 2 * sizeof(float));
  uint8_t* c = static_cast<uint8_t*>(codes.data());
  float* p = static_cast<float*>(pairs.data());
  pool().parallel_for(out, [&](int64_t begin, int64_t end) {
    std::vector<float> row(in);
    for (int64_t o = begin; o < end; ++o) {
      for (int64_t i = 0; i < in; ++i) row[i] = load_float(weight, o * in + i);
      for (int64_t g = 0; g < groups; ++g) {
        float lo = row[g * group], hi = lo;
        for (int64_t i = g * group; i < (g + 1) * group; ++i) lo = std::min(lo, row[i]), hi = std::max(hi, row[i]);
        const float scale = hi > lo ? (hi - lo) / levels : 1.0f;
        p[(o * groups + g) * 2] = scale;
        p[(o * groups + g) * 2 + 1] = lo;
        for (int64_t i = g * group; i < (g + 1) * group; ++i)
          set_code(c + o * row_bytes, i, stored,
                   static_cast<uint32_t>(std::clamp(std::nearbyint((row[i] - lo) / scale), 0.0f, levels)));
      }
    }
  });
  LinearWeight w = affine(keep(std::move(codes), DType::kU8, {out, row_bytes}),
                          keep(std::move(pairs), DType::kF32, {out, groups, 2}), out, in, stored, group);
  if (!name.empty()) weights_.note_stored_as(name, out * in * bits / 8 + out * groups * 4);  // as stored on disk
  return w;
}

Tensor dequantize_to_f32(const LinearWeight& w, std::vector<Buffer>& owned) {
  RS_CHECK(w.format == LinearWeight::Format::kAffine || w.format == LinearWeight::Format::kDense,
           "cannot dequantize a weight of this format on the host");
  const int64_t out = w.out_features, in = w.in_features;
  owned.push_back(Buffer::host(out * in * sizeof(float)));
  float* dst = static_cast<float*>(owned.back().data());
  if (w.format == LinearWeight::Format::kDense) {
    for (int64_t i = 0; i < out * in; ++i) dst[i] = load_float(w.weight, i);
  } else {
    const int64_t groups = in / w.scale_block_cols, row_bytes = in * w.bits / 8;
    const float* pairs = w.scales.data_as<float>();
    for (int64_t o = 0; o < out; ++o)
      for (int64_t i = 0; i < in; ++i) {
        const float* pair = pairs + (o * groups + i / w.scale_block_cols) * 2;
        // scale * q is exact in f32 (16-bit scale, 8-bit code); the bias is added with one rounding. Act-order
        // columns go back to their inputs.
        dst[o * in + (w.input_order.empty() ? i : w.input_order.data_as<int32_t>()[i])] =
            pair[0] * static_cast<float>(code_at(w.weight.data_as<uint8_t>() + o * row_bytes, i, w.bits)) + pair[1];
      }
  }
  return Tensor(owned.back().data(), DType::kF32, {out, in});
}

}  // namespace rs::model
