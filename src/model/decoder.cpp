#include "model/decoder.h"

#include <algorithm>
#include <cstring>

#include "model/rope_table.h"

namespace rs::model {
namespace {

std::string layer_prefix(int32_t layer) { return "model.layers." + std::to_string(layer) + "."; }

}  // namespace

DecoderModel::DecoderModel(const loader::ModelConfig& config, DecoderOptions options)
    : config_(config), options_(options) {}

Tensor DecoderModel::keep(Buffer buffer, DType dtype, std::vector<int64_t> shape) {
  owned_.push_back(std::move(buffer));
  return Tensor(owned_.back().data(), dtype, shape.data(), static_cast<int>(shape.size()), owned_.back().device());
}

LinearWeight DecoderModel::dense(loader::WeightSource& weights, const std::string& name, int64_t out, int64_t in) {
  return LinearWeight{LinearWeight::Format::kDense, weights.require(name, {out, in}), Tensor(), out, in};
}

LinearWeight DecoderModel::concat_rows(std::initializer_list<Tensor> parts) {
  const Tensor& first = *parts.begin();
  size_t bytes = 0;
  int64_t rows = 0;
  for (const Tensor& t : parts) {
    RS_CHECK(t.dtype() == first.dtype() && t.dim(1) == first.dim(1), "cannot fuse weights {} and {}",
             first.shape_string(), t.shape_string());
    bytes += t.bytes();
    rows += t.dim(0);
  }
  Buffer buffer = Buffer::host(bytes);
  char* cursor = static_cast<char*>(buffer.data());
  for (const Tensor& t : parts) {
    std::memcpy(cursor, t.data(), t.bytes());
    cursor += t.bytes();
  }
  const int64_t in = first.dim(1);
  LinearWeight fused{LinearWeight::Format::kDense, Tensor(buffer.data(), first.dtype(), {rows, in}), Tensor(), rows,
                     in};
  // A backend that repacks weights reads only its packed copy: then the row-major concatenation is dropped here
  // (it is not a file mapping the OS could reclaim) and `weight` keeps just its shape and dtype.
  backend_->prepare_linear(fused, owned_);
  if (!fused.packed.empty()) {
    fused.weight = Tensor(nullptr, first.dtype(), {rows, in});
    return fused;
  }
  fused.weight = keep(std::move(buffer), first.dtype(), {rows, in});
  return fused;
}

void DecoderModel::load_attention(const std::string& prefix, loader::WeightSource& weights, AttentionWeights& attn) {
  const int64_t hidden = config_.hidden_size, hd = config_.head_dim;
  const int64_t q_out = config_.num_heads * hd, kv_out = config_.num_kv_heads * hd;
  const std::string p = prefix + "self_attn.";
  // One projection for q, k and v: a decode step reads the three weights in one pass (one GEMV or GEMM launch).
  attn.qkv = concat_rows({weights.require(p + "q_proj.weight", {q_out, hidden}),
                          weights.require(p + "k_proj.weight", {kv_out, hidden}),
                          weights.require(p + "v_proj.weight", {kv_out, hidden})});
  attn.o = dense(weights, p + "o_proj.weight", hidden, q_out);
  if (config_.attention_bias) {
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
    attn.qkv_bias = keep(std::move(fused), parts[0].dtype(), {q_out + 2 * kv_out});
    attn.o_bias = weights.require(p + "o_proj.bias", {hidden});
  }
  if (options_.qk_norm) {
    attn.q_norm = weights.require(p + "q_norm.weight", {hd});
    attn.k_norm = weights.require(p + "k_norm.weight", {hd});
  }
  if (options_.sinks) attn.sinks = weights.require(p + "sinks", {config_.num_heads});
}

void DecoderModel::load_ffn(int32_t layer, const std::string& prefix, loader::WeightSource& weights,
                            FeedForwardWeights& ffn) {
  const int64_t hidden = config_.hidden_size, inter = config_.intermediate_size;
  RS_CHECK(inter > 0, "config.json: intermediate_size must be positive for a dense MLP");
  const std::string p = prefix + "mlp.";
  ffn.gate_up = concat_rows({weights.require(p + "gate_proj.weight", {inter, hidden}),
                             weights.require(p + "up_proj.weight", {inter, hidden})});
  ffn.down = dense(weights, p + "down_proj.weight", hidden, inter);
}

void DecoderModel::load(loader::WeightSource& weights, Backend& backend, const ProgressFn& progress) {
  backend_ = &backend;
  const int64_t hidden = config_.hidden_size, vocab = config_.vocab_size;
  embed_tokens_ = weights.require("model.embed_tokens.weight", {vocab, hidden});
  layers_.resize(config_.num_layers);
  for (int32_t layer = 0; layer < config_.num_layers; ++layer) {
    const std::string prefix = layer_prefix(layer);
    LayerWeights& lw = layers_[layer];
    lw.input_norm = weights.require(prefix + "input_layernorm.weight", {hidden});
    lw.post_attention_norm = weights.require(prefix + "post_attention_layernorm.weight", {hidden});
    load_attention(prefix, weights, lw.attention);
    load_ffn(layer, prefix, weights, lw.ffn);
    if (progress) progress("loading weights", static_cast<double>(layer + 1) / config_.num_layers);
  }
  final_norm_ = weights.require("model.norm.weight", {hidden});
  if (config_.tie_word_embeddings) {
    lm_head_ = LinearWeight{LinearWeight::Format::kDense, embed_tokens_, Tensor(), vocab, hidden};
  } else {
    lm_head_ = dense(weights, "lm_head.weight", vocab, hidden);
  }
  rotary_dim_ = static_cast<int32_t>(config_.head_dim * config_.rope.partial_rotary_factor);
  RS_CHECK(rotary_dim_ > 0 && rotary_dim_ % 2 == 0 && rotary_dim_ <= config_.head_dim,
           "bad rotary dim {} for head_dim {}", rotary_dim_, config_.head_dim);
  const int64_t positions = std::min<int64_t>(config_.max_position_embeddings, 1 << 18);
  std::vector<float> table = rope_cos_sin_table(config_.rope, rotary_dim_, positions);
  Buffer host = Buffer::host(table.size() * sizeof(float));
  std::memcpy(host.data(), table.data(), host.bytes());
  rope_table_ = keep(std::move(host), DType::kF32, {positions, rotary_dim_});
  // Devices other than the host get copies of every weight tensor.
  if (!backend.device().is_cpu()) {
    auto up = [&](Tensor& t) {
      if (!t.empty()) t = backend.upload_weight(t, owned_);
    };
    auto up_linear = [&](LinearWeight& w) {
      up(w.weight);
      up(w.scales);
    };
    up(embed_tokens_), up(final_norm_), up_linear(lm_head_), up(rope_table_);
    for (auto& lw : layers_) {
      auto& a = lw.attention;
      up(lw.input_norm), up(lw.post_attention_norm);
      up_linear(a.qkv), up_linear(a.o);
      up(a.qkv_bias), up(a.o_bias), up(a.q_norm), up(a.k_norm), up(a.sinks);
      auto& f = lw.ffn;
      up_linear(f.gate_up), up_linear(f.down), up_linear(f.router), up(f.router_bias);
      for (auto* list : {&f.experts.gate, &f.experts.up, &f.experts.gate_up, &f.experts.down})
        for (auto& w : *list) up_linear(w);
      up(f.experts.gate_up_bias), up(f.experts.down_bias);
    }
    if (config_.tie_word_embeddings) lm_head_.weight = embed_tokens_;
  }
  // Dense projections may be repacked for the backend's GEMM. So is the LM head: decode streams all of it every step
  // (a quarter of Qwen3-0.6B's bytes), and the packed GEMV reads faster than row dots. A tied head keeps the
  // embedding table for lookups, so its packed copy costs vocab x hidden extra values.
  for (auto& lw : layers_) {
    auto& a = lw.attention;
    for (LinearWeight* w : {&a.qkv, &a.o, &lw.ffn.gate_up, &lw.ffn.down})
      if (!w->weight.empty() && w->packed.empty()) backend.prepare_linear(*w, owned_);
  }
  if (!lm_head_.weight.empty() && lm_head_.packed.empty()) backend.prepare_linear(lm_head_, owned_);
}

void DecoderModel::ensure_workspace(int64_t tokens) {
  if (tokens <= workspace_tokens_) return;
  const int64_t hidden = config_.hidden_size, hd = config_.head_dim;
  const int64_t q_width = config_.num_heads * hd, kv_width = config_.num_kv_heads * hd;
  const int64_t inter = std::max<int64_t>(config_.intermediate_size, 1);
  const int64_t experts = std::max(config_.num_experts, 1), topk = std::max(config_.num_experts_per_tok, 1);
  const int64_t floats_per_token = 3 * hidden + 3 * q_width + 2 * kv_width + 3 * inter + experts + 2 * topk;
  workspace_ = backend_->alloc(tokens * floats_per_token * sizeof(float));
  char* cursor = static_cast<char*>(workspace_.data());
  const Device device = workspace_.device();
  auto carve = [&](DType dtype, std::initializer_list<int64_t> shape) {
    Tensor t(cursor, dtype, shape, device);
    cursor += t.bytes();
    return t;
  };
  x_ = carve(DType::kF32, {tokens, hidden});
  h_ = carve(DType::kF32, {tokens, hidden});
  proj_ = carve(DType::kF32, {tokens, hidden});
  qkv_ = carve(DType::kF32, {tokens, q_width + 2 * kv_width});
  q_ = carve(DType::kF32, {tokens, q_width});
  attn_ = carve(DType::kF32, {tokens, q_width});
  gate_up_ = carve(DType::kF32, {tokens, 2 * inter});
  act_ = carve(DType::kF32, {tokens, inter});
  router_logits_ = carve(DType::kF32, {tokens, experts});
  topk_ids_ = carve(DType::kI32, {tokens, topk});
  topk_weights_ = carve(DType::kF32, {tokens, topk});
  workspace_tokens_ = tokens;
}

void DecoderModel::run_ffn(const FeedForwardWeights& ffn, const InputNorm& norm, Tensor x, Tensor scratch) {
  const int64_t tokens = x.dim(0);
  if (!ffn.is_moe) {
    const int64_t inter = ffn.down.in_features;
    Tensor gate_up = gate_up_.slice_rows(0, tokens).view({tokens, 2 * inter});
    Tensor act = act_.slice_rows(0, tokens).view({tokens, inter});
    backend_->linear_silu_mul_normed(x, norm, ffn.gate_up, gate_up, act);
    backend_->linear_add(act, ffn.down, Tensor(), scratch, x);
    return;
  }
  // The router and the experts both read the normalised rows.
  const Tensor& h = norm.scratch;
  backend_->rms_norm(x, norm.weight, norm.eps, norm.add_one, h);
  Tensor out = scratch;
  const int64_t experts = ffn.router.out_features, topk = config_.num_experts_per_tok;
  Tensor logits = router_logits_.slice_rows(0, tokens).view({tokens, experts});
  Tensor ids = topk_ids_.slice_rows(0, tokens).view({tokens, topk});
  Tensor weights = topk_weights_.slice_rows(0, tokens).view({tokens, topk});
  backend_->linear(h, ffn.router, ffn.router_bias, logits);
  backend_->moe_route(logits, options_.routing, config_.norm_topk_prob, ids, weights);
  backend_->moe_experts(h, ids, weights, ffn.experts, out);
  backend_->add(x, out, x);
}

void DecoderModel::forward(const StepInputs& inputs, kv::KvPool& kv, Tensor logits) {
  const int64_t tokens = inputs.token_ids.numel();
  ensure_workspace(tokens);
  const int64_t heads = config_.num_heads, hd = config_.head_dim;
  Tensor x = x_.slice_rows(0, tokens), h = h_.slice_rows(0, tokens), proj = proj_.slice_rows(0, tokens);
  Tensor qkv = qkv_.slice_rows(0, tokens), q3 = q_.slice_rows(0, tokens).view({tokens, heads, hd});
  Tensor attn = attn_.slice_rows(0, tokens);
  const float eps = static_cast<float>(config_.rms_norm_eps);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));

  // x is the residual stream. Each norm belongs to the projection that reads it (linear_normed: fused into the
  // decode GEMV on CUDA, else written to h first) and each output projection adds into x (linear_add).
  backend_->embedding(embed_tokens_, inputs.token_ids, x);
  for (int32_t layer = 0; layer < config_.num_layers; ++layer) {
    const LayerWeights& lw = layers_[layer];
    const AttentionWeights& a = lw.attention;
    const BatchView& view = inputs.groups[kv.group_of_layer(layer)];
    backend_->linear_normed(x, InputNorm{lw.input_norm, eps, false, h}, a.qkv, a.qkv_bias, qkv);
    backend_->qkv_prepare(qkv, a.q_norm, a.k_norm, eps, rope_table_, rotary_dim_, kv.k_cache(layer), kv.v_cache(layer),
                          view, q3);
    const AttentionParams params{static_cast<int32_t>(heads),  static_cast<int32_t>(config_.num_kv_heads),
                                 static_cast<int32_t>(hd),     scale,
                                 config_.layer_windows[layer], a.sinks};
    backend_->attention(q3, kv.k_cache(layer), kv.v_cache(layer), view, params, attn);
    backend_->linear_add(attn, a.o, a.o_bias, proj, x);
    run_ffn(lw.ffn, InputNorm{lw.post_attention_norm, eps, false, h}, x, proj);
  }
  const int64_t rows = inputs.logit_rows.numel();
  Tensor last = proj_.slice_rows(0, rows);
  backend_->gather_rows(x, inputs.logit_rows, last);
  backend_->linear_normed(last, InputNorm{final_norm_, eps, false, h_.slice_rows(0, rows)}, lm_head_, Tensor(), logits);
}

}  // namespace rs::model
