// Mixture-of-experts on CPU: routing (Qwen3-MoE softmax->top-k, gpt-oss top-k->softmax) and grouped expert MLPs.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "backend/cpu/kernels/kernels.h"
#include "backend/cpu/kernels/vec.h"

namespace rs::cpu {

void moe_route(const Tensor& logits, MoeRouting routing, bool renormalize, Tensor ids, Tensor weights) {
  const int64_t tokens = logits.dim(0), experts = logits.dim(1), k = ids.dim(1);
  std::vector<float> row(experts);
  std::vector<int32_t> order(experts);
  for (int64_t t = 0; t < tokens; ++t) {
    load_row(logits, t, row.data(), experts);
    if (routing == MoeRouting::kSoftmaxTopK) {
      const float max_logit = *std::max_element(row.begin(), row.end());
      float sum = 0.0f;
      for (auto& v : row) sum += (v = std::exp(v - max_logit));
      for (auto& v : row) v /= sum;
    }
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [&](int32_t a, int32_t b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
    int32_t* out_ids = ids.data_as<int32_t>() + t * k;
    float* out_w = weights.data_as<float>() + t * k;
    for (int64_t i = 0; i < k; ++i) {
      out_ids[i] = order[i];
      out_w[i] = row[order[i]];
    }
    if (routing == MoeRouting::kTopKSoftmax) {
      const float max_logit = out_w[0];
      float sum = 0.0f;
      for (int64_t i = 0; i < k; ++i) sum += (out_w[i] = std::exp(out_w[i] - max_logit));
      for (int64_t i = 0; i < k; ++i) out_w[i] /= sum;
    } else if (renormalize) {
      float sum = 0.0f;
      for (int64_t i = 0; i < k; ++i) sum += out_w[i];
      for (int64_t i = 0; i < k; ++i) out_w[i] /= sum;
    }
  }
}

namespace {

Tensor bias_row(const Tensor& bias, int32_t expert) { return bias.empty() ? Tensor() : bias.select(expert); }

// act [n, I] from gate_up [n, 2I] (interleaved gate/up rows) with gpt-oss's clamped SwiGLU.
void clamped_swiglu(const float* gate_up, int64_t n, int64_t inter, float alpha, float limit, float* act) {
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t i = 0; i < inter; ++i) {
      const float gate = std::min(gate_up[r * 2 * inter + 2 * i], limit);
      const float up = std::clamp(gate_up[r * 2 * inter + 2 * i + 1], -limit, limit);
      const float glu = gate / (1.0f + std::exp(-alpha * gate));
      act[r * inter + i] = (up + 1.0f) * glu;
    }
  }
}

}  // namespace

void moe_experts(ThreadPool& pool, const Tensor& x, const Tensor& ids, const Tensor& weights, const MoeWeights& experts,
                 Tensor out, bool bf16_activations, bool row_invariant) {
  const int64_t tokens = x.dim(0), hidden = x.dim(1), k = ids.dim(1);
  const int32_t num_experts = static_cast<int32_t>(experts.down.size());
  const int32_t total = experts.total_experts > 0 ? experts.total_experts : num_experts;
  const int32_t* id = ids.data_as<int32_t>();
  const float* w = weights.data_as<float>();
  // Token slots per local expert, ascending token order (expert parallelism: other ranks' experts are skipped).
  std::vector<std::vector<int64_t>> assigned(num_experts);
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t i = 0; i < k; ++i) {
      RS_CHECK(id[t * k + i] >= 0 && id[t * k + i] < total, "expert id {} out of range", id[t * k + i]);
      const int32_t local = id[t * k + i] - experts.first_expert;
      if (local >= 0 && local < num_experts) assigned[local].push_back(t * k + i);
    }
  std::fill_n(out.data_as<float>(), out.numel(), 0.0f);
  std::vector<float> xs, hidden_act, act, ys;
  for (int32_t e = 0; e < num_experts; ++e) {  // ascending expert id: a fixed summation order
    const auto& slots = assigned[e];
    if (slots.empty()) continue;
    const int64_t n = static_cast<int64_t>(slots.size());
    xs.resize(n * hidden);
    for (int64_t r = 0; r < n; ++r)
      std::copy_n(x.data_as<float>() + (slots[r] / k) * hidden, hidden, xs.data() + r * hidden);
    Tensor xt(xs.data(), DType::kF32, {n, hidden});
    int64_t inter;
    if (experts.activation == MoeActivation::kClampedSwiGlu) {
      inter = experts.gate_up[e].out_features / 2;
      hidden_act.resize(n * 2 * inter);
      linear(pool, xt, experts.gate_up[e], bias_row(experts.gate_up_bias, e),  // e: the local index
             Tensor(hidden_act.data(), DType::kF32, {n, 2 * inter}), bf16_activations, row_invariant);
      act.resize(n * inter);
      clamped_swiglu(hidden_act.data(), n, inter, experts.swiglu_alpha, experts.swiglu_limit, act.data());
    } else {
      inter = experts.gate[e].out_features;
      hidden_act.resize(n * 2 * inter);
      std::vector<float> up(n * inter);
      linear(pool, xt, experts.gate[e], Tensor(), Tensor(hidden_act.data(), DType::kF32, {n, inter}), bf16_activations,
             row_invariant);
      linear(pool, xt, experts.up[e], Tensor(), Tensor(up.data(), DType::kF32, {n, inter}), bf16_activations,
             row_invariant);
      act.resize(n * inter);
      for (int64_t i = 0; i < n * inter; ++i) {
        const float g = hidden_act[i];
        act[i] = g / (1.0f + std::exp(-g)) * up[i];
      }
    }
    ys.resize(n * hidden);
    linear(pool, Tensor(act.data(), DType::kF32, {n, inter}), experts.down[e], bias_row(experts.down_bias, e),
           Tensor(ys.data(), DType::kF32, {n, hidden}), bf16_activations, row_invariant);
    for (int64_t r = 0; r < n; ++r)
      axpy_f32(w[slots[r]], ys.data() + r * hidden, out.data_as<float>() + (slots[r] / k) * hidden, hidden);
  }
}

}  // namespace rs::cpu
