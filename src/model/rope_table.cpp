#include "model/rope_table.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "base/error.h"

namespace rs::model {
namespace {

// YaRN correction dimension for `rotations` full turns over the original context (MODELS.md §1.4).
double yarn_correction_dim(double rotations, int32_t dim, double base, int64_t original_max) {
  return dim * std::log(original_max / (rotations * 2 * std::numbers::pi)) / (2 * std::log(base));
}

double yarn_mscale(double scale, double mscale) { return scale <= 1 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0; }

}  // namespace

std::vector<float> rope_inv_freq(const loader::RopeConfig& rope, int32_t rotary_dim) {
  const int32_t half = rotary_dim / 2;
  std::vector<float> inv_freq(half);
  const float base = static_cast<float>(rope.theta);
  for (int32_t i = 0; i < half; ++i)
    inv_freq[i] = 1.0f / std::pow(base, static_cast<float>(2 * i) / static_cast<float>(rotary_dim));
  if (!rope.freq_factors.empty()) {
    RS_CHECK(static_cast<int32_t>(rope.freq_factors.size()) == half,
             "rope freq_factors has {} entries for {} frequencies", rope.freq_factors.size(), half);
    for (int32_t i = 0; i < half; ++i) inv_freq[i] /= rope.freq_factors[i];
  }
  if (rope.type == "linear") {
    for (auto& f : inv_freq) f /= static_cast<float>(rope.factor);
  } else if (rope.type == "llama3") {
    RS_CHECK(rope.original_max_position > 0, "llama3 rope needs original_max_position_embeddings");
    const double low_wavelen = rope.original_max_position / rope.low_freq_factor;
    const double high_wavelen = rope.original_max_position / rope.high_freq_factor;
    for (auto& f : inv_freq) {
      const double wavelen = 2 * std::numbers::pi / f;
      if (wavelen < high_wavelen) continue;
      if (wavelen > low_wavelen) {
        f = static_cast<float>(f / rope.factor);
      } else {
        const double smooth = (rope.original_max_position / wavelen - rope.low_freq_factor) /
                              (rope.high_freq_factor - rope.low_freq_factor);
        f = static_cast<float>((1 - smooth) * f / rope.factor + smooth * f);
      }
    }
  } else if (rope.type == "yarn") {
    RS_CHECK(rope.original_max_position > 0, "yarn rope needs original_max_position_embeddings");
    double low = yarn_correction_dim(rope.beta_fast, rotary_dim, rope.theta, rope.original_max_position);
    double high = yarn_correction_dim(rope.beta_slow, rotary_dim, rope.theta, rope.original_max_position);
    if (rope.truncate) {
      low = std::floor(low);
      high = std::ceil(high);
    }
    low = std::max(low, 0.0);
    high = std::min(high, static_cast<double>(rotary_dim - 1));
    if (low == high) high += 0.001;
    for (int32_t i = 0; i < half; ++i) {
      const float extrapolation = inv_freq[i];
      const float interpolation = static_cast<float>(extrapolation / rope.factor);
      const float ramp = static_cast<float>(std::clamp((i - low) / (high - low), 0.0, 1.0));
      // Low dims (high frequency) keep extrapolation; the ramp moves high dims to interpolation.
      inv_freq[i] = interpolation * ramp + extrapolation * (1.0f - ramp);
    }
  }
  return inv_freq;
}

float rope_attention_scaling(const loader::RopeConfig& rope) {
  if (rope.type != "yarn") return 1.0f;
  if (rope.attention_factor) return static_cast<float>(*rope.attention_factor);
  if (rope.mscale && rope.mscale_all_dim)
    return static_cast<float>(yarn_mscale(rope.factor, *rope.mscale) / yarn_mscale(rope.factor, *rope.mscale_all_dim));
  return static_cast<float>(yarn_mscale(rope.factor, 1.0));
}

std::vector<float> rope_cos_sin_table(const loader::RopeConfig& rope, int32_t rotary_dim, int64_t num_positions) {
  const auto inv_freq = rope_inv_freq(rope, rotary_dim);
  const float scaling = rope_attention_scaling(rope);
  const int32_t half = rotary_dim / 2;
  std::vector<float> table(num_positions * rotary_dim);
  for (int64_t pos = 0; pos < num_positions; ++pos) {
    float* row = table.data() + pos * rotary_dim;
    for (int32_t i = 0; i < half; ++i) {
      const float angle = static_cast<float>(pos) * inv_freq[i];
      row[i] = std::cos(angle) * scaling;
      row[half + i] = std::sin(angle) * scaling;
    }
  }
  return table;
}

}  // namespace rs::model
