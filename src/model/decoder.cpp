#include "model/decoder.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "model/rope_table.h"

namespace rs::model {

DecoderModel::DecoderModel(const loader::ModelConfig& config, DecoderOptions options)
    : config_(config), options_(options) {}

Tensor DecoderModel::keep(Buffer buffer, DType dtype, std::vector<int64_t> shape) {
  owned_.push_back(std::move(buffer));
  return Tensor(owned_.back().data(), dtype, shape.data(), static_cast<int>(shape.size()), owned_.back().device());
}

Tensor DecoderModel::to_f32(const Tensor& t, float offset) {
  const int64_t count = t.numel();
  Buffer buffer = Buffer::host(count * sizeof(float));
  float* out = static_cast<float*>(buffer.data());
  for (int64_t i = 0; i < count; ++i) {
    switch (t.dtype()) {
      case DType::kF32: out[i] = t.data_as<float>()[i]; break;
      case DType::kBF16: out[i] = bf16_to_f32(t.data_as<uint16_t>()[i]); break;
      case DType::kF16: out[i] = f16_to_f32(t.data_as<uint16_t>()[i]); break;
      default: RS_FAIL("expected a float tensor, got {}", dtype_name(t.dtype()));
    }
    out[i] += offset;
  }
  std::vector<int64_t> shape;
  for (int axis = 0; axis < t.ndim(); ++axis) shape.push_back(t.dim(axis));
  return keep(std::move(buffer), DType::kF32, shape);
}

Tensor DecoderModel::norm_weight(loader::WeightSource& weights, const std::string& name, int64_t width) {
  const Tensor w = weights.require(name, {width});
  return options_.zero_centered_norm && !norms_stored_shifted_ ? to_f32(w, 1.0f) : w;
}

LinearLoader& DecoderModel::linears(loader::WeightSource& weights) {
  if (!linear_loader_ || linear_source_ != &weights) {
    linear_loader_ = std::make_unique<LinearLoader>(weights, config_.quantization, owned_);
    linear_source_ = &weights;
  }
  return *linear_loader_;
}

LinearWeight DecoderModel::dense(loader::WeightSource& weights, const std::string& name, int64_t out, int64_t in,
                                 bool quantizable) {
  constexpr std::string_view kSuffix = ".weight";
  RS_CHECK(name.size() > kSuffix.size() && name.ends_with(kSuffix), "linear weight name '{}' must end in .weight",
           name);
  return linears(weights).load(name.substr(0, name.size() - kSuffix.size()), out, in, quantizable);
}

DecoderModel::ExpertRange DecoderModel::local_experts(int32_t count) const {
  if (!expert_parallel_ || !comm_ || comm_->size() == 1) return {0, count};
  RS_CHECK(count % comm_->size() == 0, "{} experts do not split over {} ranks", count, comm_->size());
  const int32_t per_rank = count / comm_->size();
  return {comm_->rank() * per_rank, per_rank};
}

LinearWeight DecoderModel::expert(loader::WeightSource& weights, const std::string& mlp, int64_t e, int64_t count,
                                  const std::string& proj, int64_t out, int64_t in) {
  // Expert parallelism: a stacked [E, ...] module holds the rank's block of experts (WeightSource::sharded).
  if (const ExpertRange local = local_experts(static_cast<int32_t>(count)); local.count != count) {
    if (auto stacked = linears(weights).load_expert(mlp + "switch_mlp." + proj, e - local.first, local.count, out, in))
      return *stacked;
    return dense(weights, mlp + "experts." + std::to_string(e) + "." + proj + ".weight", out, in);
  }
  if (auto stacked = linears(weights).load_expert(mlp + "switch_mlp." + proj, e, count, out, in)) return *stacked;
  return dense(weights, mlp + "experts." + std::to_string(e) + "." + proj + ".weight", out, in);
}

LinearWeight DecoderModel::concat(std::initializer_list<LinearWeight> parts) {
  return concat(std::span<const LinearWeight>(parts.begin(), parts.size()));
}

void DecoderModel::release_unused(size_t from, std::span<const LinearWeight> garbage, const LinearWeight& kept) {
  // Host copies the loader made (quantized on load, repacked AWQ/GPTQ codes, scales read as f32) that only `garbage`
  // or buffers made since index `from` reference: a fused 8B model kept ~4.5 GB of its parts' copies otherwise.
  // Tensors of the checkpoint itself are file mappings, not in owned_, and stay.
  const auto kept_by = [&](const void* data) {
    return data == kept.weight.data() || data == kept.scales.data() || data == kept.input_order.data() ||
           data == kept.packed.data();
  };
  const auto owned_by_garbage = [&](const void* data) {
    for (const LinearWeight& w : garbage)
      if (data == w.weight.data() || data == w.scales.data() || data == w.input_order.data()) return true;
    return false;
  };
  // The parts were made just before `from`: the buffers made since, and a few dozen per part before, are scanned.
  const size_t scan = std::min<size_t>(owned_.size(), (owned_.size() - from) + 64 * garbage.size() + 64);
  for (size_t i = owned_.size(); i-- > owned_.size() - scan;) {
    void* data = owned_[i].data();
    if (data == nullptr || kept_by(data)) continue;
    if (i >= from || owned_by_garbage(data)) owned_[i] = Buffer();
  }
}

LinearWeight DecoderModel::concat(std::span<const LinearWeight> parts) {
  RS_CHECK(linear_loader_ != nullptr, "weights fused before load() began");
  const size_t owned_before = owned_.size();
  LinearWeight fused = linear_loader_->stack_rows(parts);
  // Intermediates of the fusion and the parts' own copies go; what `fused` reads stays.
  release_unused(owned_before, parts, fused);
  // A backend that repacks weights reads only its packed copy: then the row-major concatenation of a dense weight is
  // dropped here (it is not a file mapping the OS could reclaim) and `weight` keeps just its shape and dtype.
  backend_->prepare_linear(fused, owned_);
  if (!fused.packed.empty() && fused.format == LinearWeight::Format::kDense && owned_.size() > owned_before &&
      owned_[owned_before].data() == fused.weight.data()) {
    owned_[owned_before] = Buffer();
    fused.weight = Tensor(nullptr, fused.weight.dtype(), {fused.out_features, fused.in_features});
  }
  return fused;
}

LinearWeight DecoderModel::concat_rows(std::initializer_list<Tensor> parts) {
  RS_CHECK(linear_loader_ != nullptr, "weights fused before load() began");
  std::vector<LinearWeight> linears;
  for (const Tensor& t : parts) linears.push_back(linear_loader_->from_dense(t));
  return concat(linears);
}

void DecoderModel::load_attention(const std::string& prefix, loader::WeightSource& weights, AttentionWeights& attn) {
  const int64_t hidden = config_.hidden_size, hd = config_.head_dim;
  const int64_t q_out = config_.num_heads * hd, kv_out = config_.num_kv_heads * hd;
  const std::string p = prefix + "self_attn.";
  LinearWeight q_proj;
  if (config_.attn_output_gate) {
    // q_proj is doubled: per head [query (hd) | gate (hd)] rows. The gate rows become their own projection.
    RS_CHECK(!config_.attention_bias, "{}: gated attention with biases is not supported", p);
    const LinearWeight doubled = dense(weights, p + "q_proj.weight", 2 * q_out, hidden);
    std::vector<int64_t> query_rows, gate_rows;
    for (int64_t head = 0; head < config_.num_heads; ++head)
      for (int64_t i = 0; i < hd; ++i) {
        query_rows.push_back(head * 2 * hd + i);
        gate_rows.push_back(head * 2 * hd + hd + i);
      }
    q_proj = linears(weights).select_rows(doubled, query_rows);
    attn.gate = linears(weights).select_rows(doubled, gate_rows);
    // The doubled projection's own copy, if the loader made one (its input order, shared by both halves, stays).
    release_unused(owned_.size(), std::span(&doubled, 1), attn.gate);
  } else {
    q_proj = dense(weights, p + "q_proj.weight", q_out, hidden);
  }
  // One projection for q, k and v: a decode step reads the three weights in one pass (one GEMV or GEMM launch).
  attn.qkv = concat({q_proj, dense(weights, p + "k_proj.weight", kv_out, hidden),
                     dense(weights, p + "v_proj.weight", kv_out, hidden)});
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
    attn.q_norm = norm_weight(weights, p + "q_norm.weight", hd);
    attn.k_norm = norm_weight(weights, p + "k_norm.weight", hd);
  }
  if (options_.sinks) attn.sinks = weights.require(p + "sinks", {config_.num_heads});
  attn.kv_scales = {kv_scale(weights, p, 'k'), kv_scale(weights, p, 'v')};
  RS_CHECK((attn.kv_scales.k > 0) == (attn.kv_scales.v > 0), "{}: the checkpoint gives a {} scale but no {} scale", p,
           attn.kv_scales.k > 0 ? "k" : "v", attn.kv_scales.k > 0 ? "v" : "k");
}

float DecoderModel::kv_scale(loader::WeightSource& weights, const std::string& attn_prefix, char side) {
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

std::vector<Model::KvScales> DecoderModel::kv_cache_scales() const {
  std::vector<KvScales> scales(layers_.size());
  bool any = false;
  for (size_t layer = 0; layer < layers_.size(); ++layer) {
    scales[layer] = layers_[layer].attention.kv_scales;
    any = any || scales[layer].k > 0;
  }
  return any ? scales : std::vector<KvScales>{};
}

void DecoderModel::load_ffn(int32_t layer, const std::string& prefix, loader::WeightSource& weights,
                            FeedForwardWeights& ffn) {
  const int64_t hidden = config_.hidden_size, inter = config_.intermediate_size;
  RS_CHECK(inter > 0, "config.json: intermediate_size must be positive for a dense MLP");
  const std::string p = prefix + "mlp.";
  ffn.gate_up = concat(
      {dense(weights, p + "gate_proj.weight", inter, hidden), dense(weights, p + "up_proj.weight", inter, hidden)});
  ffn.down = dense(weights, p + "down_proj.weight", hidden, inter);
}

void DecoderModel::load(loader::WeightSource& weights, Backend& backend, const ProgressFn& progress) {
  backend_ = &backend;
  linears(weights);
  RS_CHECK(config_.num_layers_of(loader::LayerKind::kLinearAttention) == 0 || backend.supports_recurrent_state(),
           "{} has gated-delta-net (linear attention) layers, which backend {} cannot run yet (use --backend cpu)",
           config_.architecture, backend.name());
  const int64_t hidden = config_.hidden_size;
  // A base model saved on its own (an embedding checkpoint: Qwen3Model) names its tensors without the "model." prefix.
  std::string root = config_.weight_prefix;
  if (!weights.contains(root + "embed_tokens.weight") && weights.contains("embed_tokens.weight")) {
    RS_CHECK(config_.embedding,
             "the checkpoint is a base model without an LM head (its tensors lack the '{}' prefix, as embedding "
             "models are saved): serve it with --task embed",
             root);
    root.clear();
  }
  // mlx_lm saves Qwen3-Next / Qwen3.5 as its sanitize() left them: (1 + w) norms already shifted and the depthwise
  // conv as [C, K, 1] (Hugging Face: [C, 1, K]). That conv layout is how such a checkpoint is recognised.
  norms_stored_shifted_ = false;
  for (int32_t layer = 0; layer < config_.num_layers && options_.zero_centered_norm; ++layer) {
    if (config_.layer_kinds[layer] != loader::LayerKind::kLinearAttention) continue;
    const auto conv = weights.info(root + "layers." + std::to_string(layer) + ".linear_attn.conv1d.weight");
    norms_stored_shifted_ = conv && conv->shape.size() == 3 && conv->shape[2] == 1 && conv->shape[1] > 1;
    break;
  }
  // Tensor parallelism: the rank's block of the vocabulary (head_rows()), looked up by embedding_shard.
  const LinearWeight embedding_as_head = linears(weights).embedding(root + "embed_tokens", head_rows(), hidden);
  const bool quantized_table = embedding_as_head.format != LinearWeight::Format::kDense;
  if (quantized_table)
    embed_codes_ = embedding_as_head;  // looked up from its codes (Backend::embedding_affine)
  else
    embed_tokens_ = embedding_as_head.weight;
  layers_.resize(config_.num_layers);
  for (int32_t layer = 0; layer < config_.num_layers; ++layer) {
    const std::string prefix = root + "layers." + std::to_string(layer) + ".";
    LayerWeights& lw = layers_[layer];
    lw.kind = config_.layer_kinds[layer];
    lw.input_norm = norm_weight(weights, prefix + "input_layernorm.weight", hidden);
    lw.post_attention_norm = norm_weight(weights, prefix + "post_attention_layernorm.weight", hidden);
    if (lw.kind == loader::LayerKind::kAttention)
      load_attention(prefix, weights, lw.attention);
    else
      load_gated_delta_net(prefix, weights, lw.gdn);
    load_ffn(layer, prefix, weights, lw.ffn);
    if (lw.ffn.is_moe) backend.prepare_experts(lw.ffn.experts, owned_);
    if (progress) progress("loading weights", static_cast<double>(layer + 1) / config_.num_layers);
  }
  final_norm_ = norm_weight(weights, root + "norm.weight", hidden);
  // A tied head is the embedding as stored: the table itself, or its codes. A device gets one copy of a dense table;
  // integer codes get their own copy for the head (a backend may re-lay-out a linear's codes: prepare_linear).
  // An embedding model returns hidden states: no LM head (an embedding checkpoint has none).
  const bool shared_table = config_.tie_word_embeddings && !quantized_table && !config_.embedding;
  if (config_.embedding) {
    lm_head_ = LinearWeight{};
  } else if (config_.tie_word_embeddings) {
    lm_head_ = embedding_as_head;  // with tensor parallelism, the rank's block of the vocabulary either way
  } else {
    lm_head_ = dense(weights, "lm_head.weight", head_rows(), hidden, /*quantizable=*/false);
  }
  rotary_dim_ = static_cast<int32_t>(config_.head_dim * config_.rope.partial_rotary_factor);
  RS_CHECK(rotary_dim_ > 0 && rotary_dim_ % 2 == 0 && rotary_dim_ <= config_.head_dim,
           "bad rotary dim {} for head_dim {}", rotary_dim_, config_.head_dim);
  const int64_t positions = std::min<int64_t>(config_.max_position_embeddings, 1 << 18);
  std::vector<float> table = rope_cos_sin_table(config_.rope, rotary_dim_, positions);
  Buffer host = Buffer::host(table.size() * sizeof(float));
  std::memcpy(host.data(), table.data(), host.bytes());
  rope_table_ = keep(std::move(host), DType::kF32, {positions, rotary_dim_});
  if (quantized_table) {
    backend.prepare_embedding(embed_codes_, owned_);
    if (embed_codes_.format == LinearWeight::Format::kDense) {  // the backend reads a dense table instead
      embed_tokens_ = embed_codes_.weight;
      embed_codes_ = LinearWeight{};
    }
  }
  // Devices other than the host get copies of every weight tensor (a head that shares the table, one copy).
  if (!backend.device().is_cpu()) {
    if (shared_table) lm_head_.weight = Tensor();
    for (Tensor* t :
         {&embed_tokens_, &final_norm_, &lm_head_.weight, &lm_head_.scales, &lm_head_.input_order, &rope_table_})
      if (!t->empty()) *t = backend.upload_weight(*t, owned_);
    for (auto& lw : layers_) upload_layer(lw, owned_);
    for (Tensor* t : {&embed_codes_.weight, &embed_codes_.scales})
      if (!t->empty()) *t = backend.upload_weight(*t, owned_);
    if (shared_table) lm_head_.weight = embed_tokens_;
  }
  // Dense projections may be repacked for the backend's GEMM. So is the LM head: decode streams all of it every step
  // (a quarter of Qwen3-0.6B's bytes), and the packed GEMV reads faster than row dots. A tied head keeps the
  // embedding table for lookups, so its packed copy costs vocab x hidden extra values.
  for (auto& lw : layers_) {
    auto& a = lw.attention;
    auto& g = lw.gdn;
    auto& f = lw.ffn;
    for (LinearWeight* w : {&a.qkv, &a.o, &a.gate, &f.gate_up, &f.down, &f.shared_gate_up, &f.shared_down, &g.in_qkv,
                            &g.in_z, &g.in_ba, &g.out})
      if (!w->weight.empty() && w->packed.empty()) backend.prepare_linear(*w, owned_);
  }
  if (!lm_head_.weight.empty() && lm_head_.packed.empty()) backend.prepare_linear(lm_head_, owned_);
  const auto bf16 = [](const LinearWeight& w) {
    return w.format == LinearWeight::Format::kDense && w.weight.dtype() == DType::kBF16;
  };
  typed_layer_inputs_ = true;
  for (const auto& lw : layers_)
    typed_layer_inputs_ = typed_layer_inputs_ && lw.kind == loader::LayerKind::kAttention && !lw.ffn.is_moe &&
                          lw.attention.gate.out_features == 0 && bf16(lw.attention.qkv) && bf16(lw.ffn.gate_up) &&
                          bf16(lw.ffn.down);
  typed_head_input_ = !config_.embedding && bf16(lm_head_);
}

void DecoderModel::upload_layer(LayerWeights& lw, std::vector<Buffer>& keep_alive) {
  auto up = [&](Tensor& t) {
    if (!t.empty()) t = backend_->upload_weight(t, keep_alive);
  };
  auto up_linear = [&](LinearWeight& w) {
    up(w.weight);
    up(w.scales);
    up(w.input_order);
  };
  auto& a = lw.attention;
  up(lw.input_norm), up(lw.post_attention_norm);
  up_linear(a.qkv), up_linear(a.o), up_linear(a.gate);
  up(a.qkv_bias), up(a.o_bias), up(a.q_norm), up(a.k_norm), up(a.sinks);
  auto& g = lw.gdn;
  up_linear(g.in_qkv), up_linear(g.in_z), up_linear(g.in_ba), up_linear(g.out);
  up(g.conv_weight), up(g.a_log), up(g.dt_bias), up(g.norm);
  auto& f = lw.ffn;
  up_linear(f.gate_up), up_linear(f.down), up_linear(f.router), up(f.router_bias);
  up_linear(f.shared_gate_up), up_linear(f.shared_down), up_linear(f.shared_gate);
  for (auto* list : {&f.experts.gate, &f.experts.up, &f.experts.gate_up, &f.experts.down})
    for (auto& w : *list) up_linear(w);
  up(f.experts.gate_up_bias), up(f.experts.down_bias);
}

int64_t DecoderModel::head_rows() const {
  if (!comm_ || comm_->size() == 1) return config_.vocab_size;
  RS_CHECK(config_.vocab_size % comm_->size() == 0, "a vocabulary of {} does not split over {} ranks",
           config_.vocab_size, comm_->size());
  return config_.vocab_size / comm_->size();
}

void DecoderModel::ensure_workspace(int64_t tokens) {
  if (tokens <= workspace_tokens_) return;
  if (comm_ && comm_->size() > 1) head_buffer_ = backend_->alloc(tokens * head_rows() * sizeof(float));
  const int64_t hidden = config_.hidden_size, hd = config_.head_dim;
  const int64_t q_width = config_.num_heads * hd, kv_width = config_.num_kv_heads * hd;
  const int64_t inter = std::max<int64_t>({config_.intermediate_size, config_.shared_expert_intermediate_size, 1});
  const int64_t experts = std::max(config_.num_experts, 1), topk = std::max(config_.num_experts_per_tok, 1);
  const loader::LinearAttentionConfig& linear = config_.linear;
  const int64_t gdn_floats = 2 * linear.conv_channels() + 2 * linear.value_dim() + 2 * linear.num_value_heads;
  const int64_t floats_per_token =
      4 * hidden + 4 * q_width + 2 * kv_width + 3 * inter + experts + 2 * topk + 1 + gdn_floats;
  // Every buffer starts 256-byte aligned, whatever the token count: kernels read rows with 16-byte vector loads, and a
  // buffer after an odd-sized one ({tokens, 1}, top-k ids) was misaligned for odd step budgets (--max-running-requests
  // 1 makes max_step_tokens odd: the CUDA integer GEMV then refused a gated-delta-net model's input).
  constexpr size_t kAlign = 256, kBuffers = 24;
  workspace_ = backend_->alloc(tokens * floats_per_token * sizeof(float) + kBuffers * kAlign);
  char* const base = static_cast<char*>(workspace_.data());
  char* cursor = base;
  const Device device = workspace_.device();
  int carved = 0;
  auto carve = [&](DType dtype, std::initializer_list<int64_t> shape) {
    RS_CHECK(++carved <= static_cast<int>(kBuffers), "workspace: more buffers than its alignment slack covers");
    Tensor t(cursor, dtype, shape, device);
    const size_t end = static_cast<size_t>(cursor - base) + t.bytes();
    cursor = base + (end + kAlign - 1) / kAlign * kAlign;
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
  attn_gate_ = carve(DType::kF32, {tokens, q_width});
  shared_ = carve(DType::kF32, {tokens, hidden});
  shared_gate_ = carve(DType::kF32, {tokens, 1});
  gdn_mixed_ = carve(DType::kF32, {tokens, std::max(linear.conv_channels(), 1)});
  gdn_conv_ = carve(DType::kF32, {tokens, std::max(linear.conv_channels(), 1)});
  gdn_z_ = carve(DType::kF32, {tokens, std::max(linear.value_dim(), 1)});
  gdn_ba_ = carve(DType::kF32, {tokens, std::max(2 * linear.num_value_heads, 1)});
  gdn_core_ = carve(DType::kF32, {tokens, std::max(linear.value_dim(), 1)});
  workspace_tokens_ = tokens;
}

namespace {

// The first elements of a workspace buffer viewed as `shape` (MLPs of different widths share one buffer).
Tensor leading(const Tensor& buffer, std::initializer_list<int64_t> shape) {
  const Tensor view(buffer.data(), buffer.dtype(), shape, buffer.device());
  RS_CHECK(view.numel() <= buffer.numel(), "workspace of {} cannot hold {}", buffer.shape_string(),
           view.shape_string());
  return view;
}

// An f32 workspace view's memory as the same shape in `dtype` (f32 or the narrower bf16).
Tensor retyped(const Tensor& view, DType dtype) {
  int64_t shape[Tensor::kMaxDims];
  for (int axis = 0; axis < view.ndim(); ++axis) shape[axis] = view.dim(axis);
  return Tensor(view.data(), dtype, shape, view.ndim(), view.device());
}

}  // namespace

void DecoderModel::run_ffn(const FeedForwardWeights& ffn, const Tensor& h, Tensor out) {
  const int64_t tokens = h.dim(0);
  if (!ffn.is_moe) {
    const int64_t inter = ffn.down.in_features;
    // The SwiGLU output feeds only the down projection: it takes h's dtype (Backend::linear_input_dtype).
    Tensor gate_up = leading(gate_up_, {tokens, 2 * inter}), act = retyped(leading(act_, {tokens, inter}), h.dtype());
    backend_->linear_silu_mul(h, ffn.gate_up, gate_up, act);
    backend_->linear(act, ffn.down, Tensor(), out);
    return;
  }
  const int64_t experts = ffn.router.out_features, topk = config_.num_experts_per_tok;
  Tensor logits = router_logits_.slice_rows(0, tokens).view({tokens, experts});
  Tensor ids = topk_ids_.slice_rows(0, tokens).view({tokens, topk});
  Tensor weights = topk_weights_.slice_rows(0, tokens).view({tokens, topk});
  backend_->linear(h, ffn.router, ffn.router_bias, logits);
  backend_->moe(h, logits, options_.routing, config_.norm_topk_prob, ffn.experts, ids, weights, out);
  if (ffn.shared_down.weight.empty() && ffn.shared_down.packed.empty()) return;
  // out += sigmoid(shared_gate . h) * shared_expert(h)
  const int64_t shared_inter = ffn.shared_down.in_features;
  Tensor gate_up = leading(gate_up_, {tokens, 2 * shared_inter}), act = leading(act_, {tokens, shared_inter});
  Tensor shared = shared_.slice_rows(0, tokens), gate = shared_gate_.slice_rows(0, tokens);
  backend_->linear_silu_mul(h, ffn.shared_gate_up, gate_up, act);
  backend_->linear(act, ffn.shared_down, Tensor(), shared);
  backend_->linear(h, ffn.shared_gate, Tensor(), gate);
  backend_->sigmoid_mul(shared, gate, shared);
  backend_->add(out, shared, out);
}

void DecoderModel::run_attention(int32_t layer, const StepInputs& inputs, memory::KvPool& kv, const Tensor& h,
                                 Tensor out) {
  const int64_t tokens = inputs.token_ids.numel(), heads = config_.num_heads, hd = config_.head_dim;
  const AttentionWeights& a = layers_[layer].attention;
  const BatchView& view = inputs.groups[kv.group_of_layer(layer)];
  Tensor qkv = qkv_.slice_rows(0, tokens);
  Tensor q3 = q_.slice_rows(0, tokens).view({tokens, heads, hd}), attn = attn_.slice_rows(0, tokens);
  const float eps = static_cast<float>(config_.rms_norm_eps);
  backend_->linear(h, a.qkv, a.qkv_bias, qkv);
  const QkvNormRope prepare{a.q_norm, a.k_norm, eps, rope_table_, rotary_dim_};
  const AttentionParams params{static_cast<int32_t>(heads),  static_cast<int32_t>(config_.num_kv_heads),
                               static_cast<int32_t>(hd),     1.0f / std::sqrt(static_cast<float>(hd)),
                               config_.layer_windows[layer], a.sinks};
  backend_->qkv_attention(qkv, prepare, kv.cache(layer), view, params, q3, attn);
  if (a.gate.out_features > 0) {  // out = attn * sigmoid(gate . h)
    Tensor gate = attn_gate_.slice_rows(0, tokens);
    backend_->linear(h, a.gate, Tensor(), gate);
    backend_->sigmoid_mul(attn, gate, attn);
  }
  backend_->linear(attn, a.o, a.o_bias, out);
}

void DecoderModel::capture(int32_t layer, const Tensor& x, const StepInputs& inputs) {
  if (inputs.taps == nullptr) return;
  const HiddenTaps& taps = *inputs.taps;
  for (size_t i = 0; i < taps.layers.size(); ++i)
    if (taps.layers[i] == layer)
      backend_->scatter_rows(x, inputs.groups[taps.group].kv_slots, taps.cache,
                             static_cast<int64_t>(i) * config_.hidden_size);
}

void DecoderModel::forward(const StepInputs& inputs, StepMemory& memory, Tensor logits) {
  const int64_t tokens = inputs.token_ids.numel();
  ensure_workspace(tokens);
  // The normed layer inputs h feed only linears: in bf16 where the backend's GEMM rounds them so anyway.
  const DType h_dtype = typed_layer_inputs_ ? backend_->linear_input_dtype(tokens) : DType::kF32;
  Tensor x = x_.slice_rows(0, tokens), h = retyped(h_.slice_rows(0, tokens), h_dtype);
  Tensor proj = proj_.slice_rows(0, tokens);
  const float eps = static_cast<float>(config_.rms_norm_eps);

  // Each residual add is fused with the norm that follows it: x += proj, h = norm(x).
  if (embed_codes_.format == LinearWeight::Format::kAffine && head_rows() != config_.vocab_size) {
    backend_->embedding_affine_shard(embed_codes_, inputs.token_ids, comm_->rank() * head_rows(), config_.vocab_size,
                                     x);
    comm_->all_reduce_sum(x);
  } else if (embed_codes_.format == LinearWeight::Format::kAffine) {
    backend_->embedding_affine(embed_codes_, inputs.token_ids, x);
  } else if (head_rows() != config_.vocab_size) {  // tensor parallelism: each rank's rows, summed
    backend_->embedding_shard(embed_tokens_, inputs.token_ids, comm_->rank() * head_rows(), config_.vocab_size, x);
    comm_->all_reduce_sum(x);
  } else {
    backend_->embedding(embed_tokens_, inputs.token_ids, x);
  }
  backend_->rms_norm(x, layers_[0].input_norm, eps, false, h);
  for (int32_t layer = 0; layer < config_.num_layers; ++layer) {
    capture(layer, x, inputs);
    const LayerWeights& lw = layers_[layer];
    if (lw.kind == loader::LayerKind::kAttention) {
      run_attention(layer, inputs, memory.kv, h, proj);
    } else {
      RS_CHECK(memory.state != nullptr, "layer {} keeps recurrent state but the step has no state pool", layer);
      run_gated_delta_net(layer, inputs, *memory.state, proj);
    }
    if (comm_) comm_->all_reduce_sum(proj);  // tensor parallelism: the heads' shares of o_proj's output
    backend_->add_rms_norm(x, proj, lw.post_attention_norm, eps, false, h);
    run_ffn(lw.ffn, h, proj);
    if (comm_) comm_->all_reduce_sum(proj);  // the MLP width's (and experts') shares of down_proj's output
    if (layer + 1 < config_.num_layers) backend_->add_rms_norm(x, proj, layers_[layer + 1].input_norm, eps, false, h);
  }
  backend_->add(x, proj, x);
  capture(config_.num_layers, x, inputs);
  // The rows that need logits: gathered (f32) into proj, normed into h, typed for the LM head as the layers' inputs.
  const int64_t rows = inputs.logit_rows.numel();
  Tensor last = proj_.slice_rows(0, rows);
  backend_->gather_rows(x, inputs.logit_rows, last);
  const DType head_dtype = typed_head_input_ ? backend_->linear_input_dtype(rows) : DType::kF32;
  if (config_.embedding) {  // the normed hidden states are the output
    backend_->rms_norm(last, final_norm_, eps, false, logits);
    return;
  }
  Tensor normed = retyped(h_.slice_rows(0, rows), head_dtype);
  backend_->rms_norm(last, final_norm_, eps, false, normed);
  if (!comm_ || comm_->size() == 1) {
    backend_->linear(normed, lm_head_, Tensor(), logits);
    return;
  }
  // Tensor parallelism: this rank's vocabulary block, gathered into rank 0's logits (the others pass none).
  Tensor block(head_buffer_.data(), DType::kF32, {rows, head_rows()}, head_buffer_.device());
  backend_->linear(normed, lm_head_, Tensor(), block);
  comm_->gather_columns(block, logits);
}

}  // namespace rs::model
