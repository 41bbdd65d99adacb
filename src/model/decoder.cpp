#include "model/decoder.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "model/blocks/feed_forward.h"
#include "model/blocks/gated_delta_net.h"
#include "model/blocks/weight_visitors.h"
#include "model/rope_table.h"

namespace rs::model {

DecoderModel::DecoderModel(const loader::ModelConfig& config, DecoderOptions options)
    : config_(config), options_(options) {}

std::vector<Model::KvScales> DecoderModel::kv_cache_scales() const {
  std::vector<KvScales> scales(layers_.size());
  bool any = false;
  for (size_t layer = 0; layer < layers_.size(); ++layer) {
    scales[layer] = layers_[layer].mixer->kv_scales();
    any = any || scales[layer].k > 0;
  }
  return any ? scales : std::vector<KvScales>{};
}

std::unique_ptr<FeedForward> DecoderModel::load_ffn(int32_t /*layer*/, const std::string& prefix,
                                                    WeightBuilder& build) {
  return DenseMlp::load(build, prefix + "mlp.", config_.hidden_size, config_.intermediate_size);
}

void DecoderModel::load(loader::WeightSource& weights, Backend& backend, const ProgressFn& progress) {
  backend_ = &backend;
  WeightBuilder build(config_, weights, backend, owned_, comm_, expert_parallel_);
  build.zero_centered_norm = options_.zero_centered_norm;
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
  for (int32_t layer = 0; layer < config_.num_layers && options_.zero_centered_norm; ++layer) {
    if (config_.layer_kinds[layer] != loader::LayerKind::kLinearAttention) continue;
    const auto conv = weights.info(root + "layers." + std::to_string(layer) + ".linear_attn.conv1d.weight");
    build.norms_stored_shifted = conv && conv->shape.size() == 3 && conv->shape[2] == 1 && conv->shape[1] > 1;
    break;
  }
  // Tensor parallelism: the rank's block of the vocabulary (head_rows()), looked up by embedding_shard.
  const LinearWeight embedding_as_head = build.linears().embedding(root + "embed_tokens", head_rows(), hidden);
  const bool quantized_table = embedding_as_head.format != LinearWeight::Format::kDense;
  if (quantized_table)
    embed_codes_ = embedding_as_head;  // looked up from its codes (Backend::embedding_affine)
  else
    embed_tokens_ = embedding_as_head.weight;
  layers_.resize(config_.num_layers);
  Preparer expert_preparer(backend, owned_, /*experts_only=*/true);
  for (int32_t layer = 0; layer < config_.num_layers; ++layer) {
    const std::string prefix = root + "layers." + std::to_string(layer) + ".";
    DecoderLayer& lw = layers_[layer];
    lw.input_norm = build.norm_weight(prefix + "input_layernorm.weight", hidden);
    lw.post_attention_norm = build.norm_weight(prefix + "post_attention_layernorm.weight", hidden);
    if (config_.layer_kinds[layer] == loader::LayerKind::kAttention)
      lw.mixer = Attention::load(build, config_, prefix, layer, options_.attention, rope_);
    else
      lw.mixer = GatedDeltaNet::load(build, config_, prefix);
    lw.ffn = load_ffn(layer, prefix, build);
    lw.ffn->visit(expert_preparer);
    if (progress) progress("loading weights", static_cast<double>(layer + 1) / config_.num_layers);
  }
  final_norm_ = build.norm_weight(root + "norm.weight", hidden);
  // A tied head is the embedding as stored: the table itself, or its codes. A device gets one copy of a dense table;
  // integer codes get their own copy for the head (a backend may re-lay-out a linear's codes: prepare_linear).
  // An embedding model returns hidden states: no LM head (an embedding checkpoint has none).
  const bool shared_table = config_.tie_word_embeddings && !quantized_table && !config_.embedding;
  if (config_.embedding) {
    lm_head_ = LinearWeight{};
  } else if (config_.tie_word_embeddings) {
    lm_head_ = embedding_as_head;  // with tensor parallelism, the rank's block of the vocabulary either way
  } else {
    lm_head_ = build.dense("lm_head.weight", head_rows(), hidden, /*quantizable=*/false);
  }
  rope_.rotary_dim = static_cast<int32_t>(config_.head_dim * config_.rope.partial_rotary_factor);
  RS_CHECK(rope_.rotary_dim > 0 && rope_.rotary_dim % 2 == 0 && rope_.rotary_dim <= config_.head_dim,
           "bad rotary dim {} for head_dim {}", rope_.rotary_dim, config_.head_dim);
  const int64_t positions = std::min<int64_t>(config_.max_position_embeddings, 1 << 18);
  std::vector<float> table = rope_cos_sin_table(config_.rope, rope_.rotary_dim, positions);
  Buffer host = Buffer::host(table.size() * sizeof(float));
  std::memcpy(host.data(), table.data(), host.bytes());
  rope_.table = build.keep(std::move(host), DType::kF32, {positions, rope_.rotary_dim});
  if (quantized_table) {
    backend.prepare_embedding(embed_codes_, owned_);
    if (embed_codes_.format == LinearWeight::Format::kDense) {  // the backend reads a dense table instead
      embed_tokens_ = embed_codes_.weight;
      embed_codes_ = LinearWeight{};
    }
  }
  upload_and_prepare(backend, shared_table);
  typed_layer_inputs_ = true;
  for (const auto& lw : layers_)
    typed_layer_inputs_ = typed_layer_inputs_ && lw.mixer->takes_typed_input() && lw.ffn->takes_typed_input();
  typed_head_input_ = !config_.embedding && is_dense_bf16(lm_head_);
}

void DecoderModel::upload_and_prepare(Backend& backend, bool shared_table) {
  // Devices other than the host get copies of every weight tensor (a head that shares the table, one copy).
  if (!backend.device().is_cpu()) {
    if (shared_table) lm_head_.weight = Tensor();
    Uploader upload(backend, owned_);
    for (Tensor* t : {&embed_tokens_, &final_norm_, &rope_.table}) upload.tensor(*t);
    upload.linear(lm_head_, false);
    for (DecoderLayer& lw : layers_) {
      upload.tensor(lw.input_norm);
      upload.tensor(lw.post_attention_norm);
      lw.mixer->visit(upload);
      lw.ffn->visit(upload);
    }
    upload.tensor(embed_codes_.weight);
    upload.tensor(embed_codes_.scales);
    if (shared_table) lm_head_.weight = embed_tokens_;
  }
  // Dense projections may be repacked for the backend's GEMM. So is the LM head: decode streams all of it every step
  // (a quarter of Qwen3-0.6B's bytes), and the packed GEMV reads faster than row dots. A tied head keeps the
  // embedding table for lookups, so its packed copy costs vocab x hidden extra values.
  Preparer prepare(backend, owned_, /*experts_only=*/false);
  for (DecoderLayer& lw : layers_) {
    lw.mixer->visit(prepare);
    lw.ffn->visit(prepare);
  }
  prepare.linear(lm_head_, true);
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
  ScratchNeed scratch;
  for (const DecoderLayer& lw : layers_)
    scratch = scratch.covering(lw.mixer->scratch_need()).covering(lw.ffn->scratch_need());
  // x, h and proj, each [tokens, hidden] f32 and 256-byte aligned, then the scratch.
  const size_t row_bytes = static_cast<size_t>(tokens * config_.hidden_size) * sizeof(float);
  const size_t stream_bytes = (row_bytes + Scratch::kAlign - 1) / Scratch::kAlign * Scratch::kAlign;
  scratch_offset_ = 3 * stream_bytes;
  scratch_bytes_ = Scratch::bytes_for(scratch, tokens);
  workspace_ = backend_->alloc(scratch_offset_ + scratch_bytes_);
  char* const base = static_cast<char*>(workspace_.data());
  const Device device = workspace_.device();
  x_ = Tensor(base, DType::kF32, {tokens, config_.hidden_size}, device);
  h_ = Tensor(base + stream_bytes, DType::kF32, {tokens, config_.hidden_size}, device);
  proj_ = Tensor(base + 2 * stream_bytes, DType::kF32, {tokens, config_.hidden_size}, device);
  workspace_tokens_ = tokens;
}

namespace {

// An f32 workspace view's memory as the same shape in `dtype` (f32 or the narrower bf16).
Tensor retyped(const Tensor& view, DType dtype) {
  int64_t shape[Tensor::kMaxDims];
  for (int axis = 0; axis < view.ndim(); ++axis) shape[axis] = view.dim(axis);
  return Tensor(view.data(), dtype, shape, view.ndim(), view.device());
}

}  // namespace

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
  Scratch scratch(static_cast<char*>(workspace_.data()) + scratch_offset_, scratch_bytes_, workspace_.device());
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
    DecoderLayer& lw = layers_[layer];
    const LayerStep step{layer, inputs, memory, *backend_, scratch};
    scratch.reset();
    lw.mixer->run(step, h, proj);
    if (comm_) comm_->all_reduce_sum(proj);  // tensor parallelism: the heads' shares of o_proj's output
    backend_->add_rms_norm(x, proj, lw.post_attention_norm, eps, false, h);
    scratch.reset();
    lw.ffn->run(step, h, proj);
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
