#include "model/blocks/attention.h"

#include <cmath>
#include <cstring>

namespace rs::model {

std::unique_ptr<Attention> Attention::load(WeightBuilder& build, const loader::ModelConfig& config,
                                           const std::string& prefix, int32_t layer, AttentionOptions options,
                                           const RopeTable& rope) {
  std::unique_ptr<Attention> attn(new Attention(rope));
  loader::WeightSource& weights = build.source();
  const int64_t hidden = config.hidden_size, hd = config.head_dim;
  const int64_t q_out = config.num_heads * hd, kv_out = config.num_kv_heads * hd;
  const std::string p = prefix + "self_attn.";
  LinearWeight q_proj;
  if (config.attn_output_gate) {
    // q_proj is doubled: per head [query (hd) | gate (hd)] rows. The gate rows become their own projection.
    RS_CHECK(!config.attention_bias, "{}: gated attention with biases is not supported", p);
    const LinearWeight doubled = build.dense(p + "q_proj.weight", 2 * q_out, hidden);
    std::vector<int64_t> query_rows, gate_rows;
    for (int64_t head = 0; head < config.num_heads; ++head)
      for (int64_t i = 0; i < hd; ++i) {
        query_rows.push_back(head * 2 * hd + i);
        gate_rows.push_back(head * 2 * hd + hd + i);
      }
    q_proj = build.select_rows(doubled, query_rows);
    attn->gate_ = build.select_rows(doubled, gate_rows);
    // The doubled projection's own copy, if the loader made one (its input order, shared by both halves, stays).
    build.release_unused(build.owned().size(), std::span(&doubled, 1), attn->gate_);
  } else {
    q_proj = build.dense(p + "q_proj.weight", q_out, hidden);
  }
  // One projection for q, k and v: a decode step reads the three weights in one pass (one GEMV or GEMM launch).
  attn->qkv_ = build.concat(
      {q_proj, build.dense(p + "k_proj.weight", kv_out, hidden), build.dense(p + "v_proj.weight", kv_out, hidden)});
  attn->o_ = build.dense(p + "o_proj.weight", hidden, q_out);
  if (config.attention_bias) {
    const Tensor parts[] = {weights.require(p + "q_proj.bias", {q_out}), weights.require(p + "k_proj.bias", {kv_out}),
                            weights.require(p + "v_proj.bias", {kv_out})};
    RS_CHECK(parts[1].dtype() == parts[0].dtype() && parts[2].dtype() == parts[0].dtype(),
             "{}: q/k/v biases differ in dtype", p);
    Buffer fused = Buffer::host(parts[0].bytes() + parts[1].bytes() + parts[2].bytes());
    char* cursor = static_cast<char*>(fused.data());
    for (const Tensor& part : parts) {
      std::memcpy(cursor, part.data(), part.bytes());
      cursor += part.bytes();
    }
    attn->qkv_bias_ = build.keep(std::move(fused), parts[0].dtype(), {q_out + 2 * kv_out});
    attn->o_bias_ = weights.require(p + "o_proj.bias", {hidden});
  }
  if (options.qk_norm) {
    attn->q_norm_ = build.norm_weight(p + "q_norm.weight", hd);
    attn->k_norm_ = build.norm_weight(p + "k_norm.weight", hd);
  }
  attn->set_shape(config, layer, options.sinks ? weights.require(p + "sinks", {config.num_heads}) : Tensor());
  attn->params_.causal = options.causal;
  attn->kv_scales_ = {kv_scale(weights, p, 'k'), kv_scale(weights, p, 'v')};
  RS_CHECK((attn->kv_scales_.k > 0) == (attn->kv_scales_.v > 0), "{}: the checkpoint gives a {} scale but no {} scale",
           p, attn->kv_scales_.k > 0 ? "k" : "v", attn->kv_scales_.k > 0 ? "v" : "k");
  return attn;
}

std::unique_ptr<Attention> Attention::load_projected(WeightBuilder& build, const loader::ModelConfig& config,
                                                     const std::string& prefix, int32_t layer, const RopeTable& rope) {
  std::unique_ptr<Attention> attn(new Attention(rope));
  attn->o_ = build.dense(prefix + "self_attn.o_proj.weight", config.hidden_size, config.num_heads * config.head_dim);
  attn->set_shape(config, layer, Tensor());
  return attn;
}

void Attention::set_shape(const loader::ModelConfig& config, int32_t layer, Tensor sinks) {
  params_ = AttentionParams{static_cast<int32_t>(config.num_heads),
                            static_cast<int32_t>(config.num_kv_heads),
                            static_cast<int32_t>(config.head_dim),
                            1.0f / std::sqrt(static_cast<float>(config.head_dim)),
                            config.layer_windows.empty() ? 0 : config.layer_windows[layer],
                            std::move(sinks)};
  eps_ = static_cast<float>(config.rms_norm_eps);
}

float Attention::kv_scale(loader::WeightSource& weights, const std::string& attn_prefix, char side) {
  // The names FP8 checkpoints give a layer's K (V) cache scale: compressed-tensors' kv_cache_scheme, ModelOpt's, the
  // output scale of k_proj (older compressed-tensors and Quark), and vLLM's own. One value per tensor.
  const std::string s(1, side);
  for (const std::string& name : {attn_prefix + s + "_scale", attn_prefix + s + "_proj." + s + "_scale",
                                  attn_prefix + s + "_proj.output_scale", attn_prefix + "attn." + s + "_scale"}) {
    const auto info = weights.info(name);
    if (!info) continue;
    int64_t count = 1;
    for (int64_t d : info->shape) count *= d;
    RS_CHECK(count == 1, "{}: a per-tensor KV cache scale must hold one value (shape of {} values)", name, count);
    const float value = load_float(weights.require(name, info->shape), 0);
    RS_CHECK(value > 0.0f && std::isfinite(value), "{}: a KV cache scale must be positive and finite, not {}", name,
             value);
    return value;
  }
  return 0.0f;
}

void Attention::visit(WeightVisitor& visitor) {
  for (LinearWeight* w : {&qkv_, &o_, &gate_}) visitor.linear(*w, true);
  for (Tensor* t : {&qkv_bias_, &o_bias_, &q_norm_, &k_norm_, &params_.sinks}) visitor.tensor(*t);
}

ScratchNeed Attention::scratch_need() const {
  const int64_t q_width = int64_t{params_.num_heads} * params_.head_dim;
  const int64_t qkv_width = q_width + 2 * int64_t{params_.num_kv_heads} * params_.head_dim;
  return {qkv_width + 3 * q_width, 4};
}

void Attention::attend(const LayerStep& step, const Tensor& qkv, Tensor attn) {
  const int64_t tokens = qkv.dim(0);
  Tensor q3 = step.scratch.take(DType::kF32, {tokens, params_.num_heads, params_.head_dim});
  const QkvNormRope prepare{q_norm_, k_norm_, eps_, rope_.table, rope_.rotary_dim};
  memory::KvPool& kv = step.memory.kv;
  step.backend.qkv_attention(qkv, prepare, kv.cache(step.layer), step.inputs.groups[kv.group_of_layer(step.layer)],
                             params_, q3, attn);
}

void Attention::run(const LayerStep& step, const Tensor& h, Tensor out) {
  const int64_t tokens = h.dim(0), q_width = int64_t{params_.num_heads} * params_.head_dim;
  Backend& backend = step.backend;
  Tensor qkv = step.scratch.take(DType::kF32, {tokens, qkv_.out_features});
  Tensor attn = step.scratch.take(DType::kF32, {tokens, q_width});
  backend.linear(h, qkv_, qkv_bias_, qkv);
  attend(step, qkv, attn);
  if (gate_.out_features > 0) {  // out = attn * sigmoid(gate . h)
    Tensor gate = step.scratch.take(DType::kF32, {tokens, q_width});
    backend.linear(h, gate_, Tensor(), gate);
    backend.sigmoid_mul(attn, gate, attn);
  }
  backend.linear(attn, o_, o_bias_, out);
}

void Attention::run_projected(const LayerStep& step, const Tensor& qkv, Tensor out) {
  Tensor attn = step.scratch.take(DType::kF32, {qkv.dim(0), int64_t{params_.num_heads} * params_.head_dim});
  attend(step, qkv, attn);
  step.backend.linear(attn, o_, o_bias_, out);
}

}  // namespace rs::model
