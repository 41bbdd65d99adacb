#include "backend/cpu/kernels/affine_parts.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cpu/kernels/gemm_affine.h"
#include "base/error.h"

namespace rs::cpu {
namespace {

constexpr int64_t kMinPartRows = 64;  // shorter narrow ranges stay wide: a part costs a parallel_for per call

// Whether row r's codes all fit 4 bits, and whether its (scale, bias) pairs repeat over each pair of groups.
struct RowShape {
  bool four_bit = false, merged = false;
  bool operator==(const RowShape&) const = default;
};

RowShape shape_of(const LinearWeight& w, int64_t r) {
  const int64_t in = w.in_features, groups = in / w.scale_block_cols;
  const uint8_t* codes = w.weight.data_as<uint8_t>() + r * in;
  const float* pairs = w.scales.data_as<float>() + r * groups * 2;
  RowShape s;
  s.four_bit = std::all_of(codes, codes + in, [](uint8_t c) { return c < 16; });
  s.merged = groups % 2 == 0;
  for (int64_t g = 0; s.merged && g < groups; g += 2)
    s.merged = pairs[2 * g] == pairs[2 * g + 2] && pairs[2 * g + 1] == pairs[2 * g + 3];
  return s;
}

LinearWeight part_weight(const LinearWeight& w, const AffinePart& p) {
  LinearWeight out;
  out.format = LinearWeight::Format::kAffine;
  out.weight = Tensor(const_cast<uint8_t*>(p.codes), DType::kU8, {p.rows, w.in_features * p.bits / 8});
  out.scales = Tensor(const_cast<float*>(p.pairs), DType::kF32, {p.rows, w.in_features / p.group, 2});
  out.out_features = p.rows;
  out.in_features = w.in_features;
  out.scale_block_rows = 1;
  out.scale_block_cols = p.group;
  out.bits = p.bits;
  return out;
}

// The power of two z with bias = -z x scale in every group of the part, or 0.
float symmetric_zero(const AffinePart& p, int64_t in) {
  const int64_t groups = p.rows * (in / p.group);
  float zero = 0.0f;
  for (int64_t g = 0; g < groups && zero == 0.0f; ++g)
    if (p.pairs[2 * g] != 0.0f) zero = -p.pairs[2 * g + 1] / p.pairs[2 * g];
  if (!(zero >= 1.0f && zero <= 256.0f) || std::ldexp(1.0f, std::ilogb(zero)) != zero) return 0.0f;
  for (int64_t g = 0; g < groups; ++g)
    if (p.pairs[2 * g + 1] != -zero * p.pairs[2 * g]) return 0.0f;
  return zero;
}

// Gives symmetric parts their scales alone; whether any was.
bool add_symmetric_scales(std::vector<AffinePart>& parts, int64_t in, std::vector<Buffer>& keep_alive) {
  bool any = false;
  for (AffinePart& p : parts) {
    const float zero = symmetric_zero(p, in);
    if (zero == 0.0f) continue;
    const int64_t groups = p.rows * (in / p.group);
    keep_alive.push_back(Buffer::host(groups * sizeof(float)));
    float* scales = static_cast<float*>(keep_alive.back().data());
    for (int64_t g = 0; g < groups; ++g) scales[g] = p.pairs[2 * g];
    p.scales = scales;
    p.zero = zero;
    any = true;
  }
  return any;
}

// A factor d with values[i] == d * k[i] exactly for bytes k[i] (stored in levels[2 i]), or false. Any such d will do:
// the products are what the kernels use.
bool factor_out(const float* values, int64_t stride, int64_t count, float* d, uint8_t* levels) {
  float largest = 0.0f;
  for (int64_t i = 0; i < count; ++i)
    if (std::abs(values[i * stride]) > std::abs(largest)) largest = values[i * stride];
  if (largest == 0.0f) {  // all zero
    *d = 0.0f;
    for (int64_t i = 0; i < count; ++i) levels[2 * i] = 0;
    return true;
  }
  for (int k = 1; k < 256; ++k) {
    const float candidate = largest / static_cast<float>(k);
    bool ok = true;
    for (int64_t i = 0; i < count && ok; ++i) {
      const float level = std::nearbyint(values[i * stride] / candidate);
      ok = level >= 0.0f && level <= 255.0f && candidate * level == values[i * stride];
      if (ok) levels[2 * i] = static_cast<uint8_t>(level);
    }
    if (ok) {
      *d = candidate;
      return true;
    }
  }
  return false;
}

// Gives parts with groups of 32 whose scales and biases factor per 256 inputs their two-level form; whether any.
bool add_two_level_scales(std::vector<AffinePart>& parts, int64_t in, std::vector<Buffer>& keep_alive) {
  if (in % 256 != 0) return false;
  bool any = false;
  for (AffinePart& p : parts) {
    if (p.scales || p.group != 32) continue;  // the GEMV builds a superblock's eight pairs in one register
    const int64_t groups = in / p.group, per_super = 256 / p.group, supers = in / 256;
    Buffer levels_buffer = Buffer::host(p.rows * groups * 2);
    Buffer supers_buffer = Buffer::host(p.rows * supers * 2 * sizeof(float));
    uint8_t* levels = static_cast<uint8_t*>(levels_buffer.data());
    float* factors = static_cast<float*>(supers_buffer.data());
    bool ok = true;
    for (int64_t r = 0; r < p.rows && ok; ++r)
      for (int64_t s = 0; s < supers && ok; ++s) {
        const float* pairs = p.pairs + (r * groups + s * per_super) * 2;
        uint8_t* level = levels + (r * groups + s * per_super) * 2;
        float* factor = factors + (r * supers + s) * 2;
        ok = factor_out(pairs, 2, per_super, &factor[0], level) &&
             factor_out(pairs + 1, 2, per_super, &factor[1], level + 1);
      }
    if (!ok) continue;
    keep_alive.push_back(std::move(levels_buffer));
    keep_alive.push_back(std::move(supers_buffer));
    p.levels = levels;
    p.supers = factors;
    any = true;
  }
  return any;
}

}  // namespace

std::vector<AffinePart> compact_affine(const LinearWeight& w, std::vector<Buffer>& keep_alive) {
  if (w.format != LinearWeight::Format::kAffine || !affine_kernel_supports(w) || !w.input_order.empty()) return {};
  if (w.bits != 8) {  // nothing to narrow; perhaps symmetric
    std::vector<AffinePart> whole{AffinePart{0, w.out_features, w.bits, w.scale_block_cols, w.weight.data_as<uint8_t>(),
                                             w.scales.data_as<float>()}};
    const bool symmetric = add_symmetric_scales(whole, w.in_features, keep_alive);
    const bool two_level = add_two_level_scales(whole, w.in_features, keep_alive);
    return symmetric || two_level ? whole : std::vector<AffinePart>{};
  }
  const int64_t in = w.in_features, group = w.scale_block_cols, groups = in / group;
  // Runs of rows of one shape; a run too short to pay for its own call is kept wide.
  struct Run {
    int64_t begin, end;
    RowShape shape;
  };
  std::vector<Run> runs;
  for (int64_t r = 0; r < w.out_features; ++r) {
    const RowShape s = shape_of(w, r);
    if (runs.empty() || !(runs.back().shape == s))
      runs.push_back({r, r + 1, s});
    else
      runs.back().end = r + 1;
  }
  std::vector<AffinePart> parts;
  bool narrowed = false;
  for (const Run& run : runs) {
    AffinePart p{run.begin,
                 run.end - run.begin,
                 8,
                 group,
                 w.weight.data_as<uint8_t>() + run.begin * in,
                 w.scales.data_as<float>() + run.begin * groups * 2};
    if (p.rows >= kMinPartRows) {
      // The narrowest form the kernels run: 4-bit codes in merged groups, else either half of that.
      AffinePart narrow = p;
      bool found = false;
      for (const auto& [bits, merge] : {std::pair{4, true}, std::pair{4, false}, std::pair{8, true}}) {
        if ((bits == 4 && !run.shape.four_bit) || (merge && !run.shape.merged)) continue;
        LinearWeight probe = w;
        probe.bits = bits;
        probe.scale_block_cols = merge ? 2 * group : group;
        if (!affine_kernel_supports(probe)) continue;
        narrow.bits = bits;
        narrow.group = probe.scale_block_cols;
        found = true;
        break;
      }
      if (found) {
        const int64_t row_bytes = in * narrow.bits / 8, narrow_groups = in / narrow.group;
        keep_alive.push_back(Buffer::host(p.rows * row_bytes));
        uint8_t* codes = static_cast<uint8_t*>(keep_alive.back().data());
        for (int64_t r = 0; r < p.rows; ++r) {
          const uint8_t* src = p.codes + r * in;
          if (narrow.bits == 4)
            for (int64_t i = 0; i < in; i += 2) codes[r * row_bytes + i / 2] = src[i] | (src[i + 1] << 4);
          else
            std::memcpy(codes + r * row_bytes, src, in);
        }
        keep_alive.push_back(Buffer::host(p.rows * narrow_groups * 2 * sizeof(float)));
        float* pairs = static_cast<float*>(keep_alive.back().data());
        const int64_t step = narrow.group / group;
        for (int64_t r = 0; r < p.rows; ++r)
          for (int64_t g = 0; g < narrow_groups; ++g) {
            pairs[(r * narrow_groups + g) * 2] = p.pairs[(r * groups + g * step) * 2];
            pairs[(r * narrow_groups + g) * 2 + 1] = p.pairs[(r * groups + g * step) * 2 + 1];
          }
        narrow.codes = codes;
        narrow.pairs = pairs;
        p = narrow;
        narrowed = true;
      }
    }
    // Adjacent wide runs (short ones included) read the original buffer as one part.
    if (!parts.empty() && parts.back().bits == 8 && parts.back().group == group && p.bits == 8 && p.group == group &&
        parts.back().codes + parts.back().rows * in == p.codes)
      parts.back().rows += p.rows;
    else
      parts.push_back(p);
  }
  const bool symmetric = add_symmetric_scales(parts, in, keep_alive);
  const bool two_level = add_two_level_scales(parts, in, keep_alive);
  if (!narrowed && !symmetric && !two_level) return {};
  return parts;
}

Tensor store_parts(const std::vector<AffinePart>& parts, std::vector<Buffer>& keep_alive) {
  const int64_t bytes = static_cast<int64_t>(parts.size() * sizeof(AffinePart));
  keep_alive.push_back(Buffer::host(bytes));
  std::memcpy(keep_alive.back().data(), parts.data(), bytes);
  return Tensor(keep_alive.back().data(), DType::kU8, {bytes});
}

std::span<const AffinePart> stored_parts(const Tensor& packed) {
  RS_CHECK(packed.numel() % static_cast<int64_t>(sizeof(AffinePart)) == 0, "not a list of affine parts");
  return {packed.data_as<AffinePart>(), static_cast<size_t>(packed.numel()) / sizeof(AffinePart)};
}

void affine_parts_linear(ThreadPool& pool, const float* x, int64_t tokens, const LinearWeight& w,
                         std::span<const AffinePart> parts, const float* bias, float* out, bool row_invariant) {
  for (const AffinePart& p : parts) {
    const CompactScales compact{p.scales, p.zero, p.levels, p.supers};
    affine_linear(pool, x, tokens, part_weight(w, p), bias ? bias + p.row_begin : nullptr, out + p.row_begin,
                  w.out_features, row_invariant, p.scales || p.levels ? &compact : nullptr);
  }
}

}  // namespace rs::cpu
