// EAGLE-3 draft heads (LlamaForCausalLMEagle3, as SGLang loads them): one Llama decoder layer whose attention reads
// the concatenation [input_layernorm(embed(token)) | hidden_norm(h)], where h is the target's residual stream at
// three layers for the token's position, projected by fc [hidden, 3 target_hidden] (a step fed by the target), or the
// head's own pre-norm output of its previous step (a draft step). Residual = h; the layer's attention and MLP add to
// it; logits = lm_head(norm(residual)) over draft_vocab_size tokens, mapped to target ids by d2t (target = d + d2t[d]).
// The head keeps its pre-norm output of every token of the last step for the next step to read. Token embeddings are
// the target's (bind_target), as SGLang shares them; so is the LM head of heads that have none of their own
// (ModelConfig::eagle_lm_head).
#include <cmath>
#include <cstring>

#include "model/architectures.h"
#include "model/decoder.h"
#include "model/rope_table.h"

namespace rs::model {
namespace {

class Eagle3Model final : public DecoderModel {
 public:
  explicit Eagle3Model(const loader::ModelConfig& config) : DecoderModel(config, DecoderOptions{}) {}

  void load(loader::WeightSource& weights, Backend& backend, const ProgressFn& progress) override;
  void reserve(int64_t max_tokens) override { ensure(max_tokens); }
  void forward(const StepInputs& inputs, StepMemory& memory, Tensor logits) override;
  void bind_target(const Model& target, const Tensor& features) override;
  std::vector<int32_t> draft_to_target() const override { return draft_to_target_; }

 private:
  // Columns [begin, begin + count) of a [rows, in] weight, as a new host tensor owned here.
  Tensor columns(const Tensor& weight, int64_t begin, int64_t count);
  void ensure(int64_t tokens);

  int64_t target_hidden_ = 0;
  Tensor embedding_, features_;  // the target's (bind_target)
  LinearWeight fc_, qkv_embed_, qkv_hidden_, o_, gate_up_, down_, lm_head_;
  Tensor input_norm_, hidden_norm_, post_norm_, norm_, rope_;
  int32_t rotary_dim_ = 0;
  std::vector<int32_t> draft_to_target_;
  int64_t tokens_ = 0;
  Buffer workspace_, hidden_out_buffer_;
  Tensor e_, in3_, h_, residual_, en_, hn_, qkv_, qkv_b_, q_, attn_, proj_, gate_up_out_, act_, hidden_out_;
};

Tensor Eagle3Model::columns(const Tensor& weight, int64_t begin, int64_t count) {
  const int64_t rows = weight.dim(0), in = weight.dim(1);
  const size_t elem = weight.bytes() / static_cast<size_t>(weight.numel());
  Buffer buffer = Buffer::host(static_cast<size_t>(rows * count) * elem);
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(static_cast<char*>(buffer.data()) + r * count * elem,
                static_cast<const char*>(weight.data()) + (r * in + begin) * elem, count * elem);
  return keep(std::move(buffer), weight.dtype(), {rows, count});
}

void Eagle3Model::load(loader::WeightSource& weights, Backend& backend, const ProgressFn& progress) {
  backend_ = &backend;
  linears(weights);
  const int64_t hidden = config_.hidden_size, hd = config_.head_dim, inter = config_.intermediate_size;
  const int64_t q_out = config_.num_heads * hd, kv_out = config_.num_kv_heads * hd;
  target_hidden_ = config_.eagle_target_hidden;
  // Releases name the tensors "midlayer.*", "fc.*", "norm.*"; some conversions prefix them with "model.".
  const std::string p = weights.contains("model.midlayer.input_layernorm.weight") ? "model." : "";
  fc_ = dense(weights, p + "fc.weight", hidden, 3 * target_hidden_);
  const std::string m = p + "midlayer.";
  input_norm_ = weights.require(m + "input_layernorm.weight", {hidden});
  hidden_norm_ = weights.require(m + "hidden_norm.weight", {hidden});
  post_norm_ = weights.require(m + "post_attention_layernorm.weight", {hidden});
  // q/k/v read [embeds | hidden]: split by input columns into two projections summed, so no concatenation is needed.
  const Tensor q = weights.require(m + "self_attn.q_proj.weight", {q_out, 2 * hidden});
  const Tensor k = weights.require(m + "self_attn.k_proj.weight", {kv_out, 2 * hidden});
  const Tensor v = weights.require(m + "self_attn.v_proj.weight", {kv_out, 2 * hidden});
  qkv_embed_ = concat_rows({columns(q, 0, hidden), columns(k, 0, hidden), columns(v, 0, hidden)});
  qkv_hidden_ = concat_rows({columns(q, hidden, hidden), columns(k, hidden, hidden), columns(v, hidden, hidden)});
  o_ = dense(weights, m + "self_attn.o_proj.weight", hidden, q_out);
  gate_up_ = concat_rows({weights.require(m + "mlp.gate_proj.weight", {inter, hidden}),
                          weights.require(m + "mlp.up_proj.weight", {inter, hidden})});
  down_ = dense(weights, m + "mlp.down_proj.weight", hidden, inter);
  norm_ = weights.require(p + "norm.weight", {hidden});
  const int64_t draft_vocab = config_.draft_vocab_size;
  const bool own_head = config_.eagle_lm_head == loader::ModelConfig::EagleLmHead::kOwn;
  if (own_head) lm_head_ = dense(weights, "lm_head.weight", draft_vocab, hidden);
  // d2t: target id = draft id + d2t[draft id]. Dummy weights map the draft vocabulary onto the first target ids.
  draft_to_target_.resize(draft_vocab);
  const bool mapped = own_head && weights.contains("d2t");
  const Tensor d2t = mapped ? weights.require("d2t", {draft_vocab}, DType::kI64) : Tensor();
  for (int64_t d = 0; d < draft_vocab; ++d) {
    const int64_t target = d + (mapped ? d2t.data_as<int64_t>()[d] : 0);
    RS_CHECK(target >= 0 && target < config_.vocab_size, "d2t maps draft token {} to {}, outside the vocabulary", d,
             target);
    draft_to_target_[d] = static_cast<int32_t>(target);
  }
  rotary_dim_ = static_cast<int32_t>(hd * config_.rope.partial_rotary_factor);
  const int64_t positions = std::min<int64_t>(config_.max_position_embeddings, 1 << 18);
  std::vector<float> table = rope_cos_sin_table(config_.rope, rotary_dim_, positions);
  Buffer host = Buffer::host(table.size() * sizeof(float));
  std::memcpy(host.data(), table.data(), host.bytes());
  rope_ = keep(std::move(host), DType::kF32, {positions, rotary_dim_});
  std::vector<Buffer>& uploaded = owned_;
  if (!backend.device().is_cpu()) {
    for (Tensor* t : {&input_norm_, &hidden_norm_, &post_norm_, &norm_, &rope_, &fc_.weight, &o_.weight, &down_.weight,
                      &lm_head_.weight})
      if (!t->empty()) *t = backend.upload_weight(*t, uploaded);
    for (LinearWeight* w : {&qkv_embed_, &qkv_hidden_, &gate_up_})
      if (!w->weight.empty() && w->weight.data() != nullptr) w->weight = backend.upload_weight(w->weight, uploaded);
  }
  for (LinearWeight* w : {&fc_, &o_, &down_, &lm_head_})
    if (w->packed.empty() && !w->weight.empty()) backend.prepare_linear(*w, uploaded);
  if (progress) progress("loading weights", 1.0);
}

void Eagle3Model::bind_target(const Model& target, const Tensor& features) {
  const Tensor embedding = target.embedding_table();
  RS_CHECK(features.ndim() == 2 && features.dim(1) == 3 * target_hidden_ && features.dtype() == DType::kF32,
           "EAGLE-3 head for a target of hidden size {} given features {}", target_hidden_, features.shape_string());
  // The target's table, as SGLang binds it (a head's own embed_tokens, where a release has one, is a copy of it).
  RS_CHECK(!embedding.empty(),
           "the target's embedding table is quantized (an MLX checkpoint): EAGLE-3 heads read a float table");
  RS_CHECK(embedding.ndim() == 2 && embedding.dim(0) == config_.vocab_size && embedding.dim(1) == config_.hidden_size,
           "the target's embedding table {} does not fit the EAGLE-3 head's [{}, {}]", embedding.shape_string(),
           config_.vocab_size, config_.hidden_size);
  embedding_ = embedding;
  features_ = features;
  using EagleLmHead = loader::ModelConfig::EagleLmHead;
  if (config_.eagle_lm_head == EagleLmHead::kTargetHead) {
    const LinearWeight* head = target.output_head();
    RS_CHECK(head != nullptr && head->out_features == config_.vocab_size && head->in_features == config_.hidden_size,
             "the EAGLE-3 head takes its LM head from the target, which has none of [{}, {}]", config_.vocab_size,
             config_.hidden_size);
    lm_head_ = *head;
  } else if (config_.eagle_lm_head == EagleLmHead::kTargetEmbedding) {
    lm_head_ = LinearWeight{LinearWeight::Format::kDense, embedding, Tensor(), config_.vocab_size, config_.hidden_size};
    backend_->prepare_linear(lm_head_, owned_);
  }
}

void Eagle3Model::ensure(int64_t tokens) {
  if (tokens <= tokens_) return;
  const int64_t hidden = config_.hidden_size, hd = config_.head_dim;
  const int64_t q_out = config_.num_heads * hd, qkv = q_out + 2 * config_.num_kv_heads * hd;
  const int64_t inter = config_.intermediate_size;
  const int64_t floats = tokens * (5 * hidden + 3 * target_hidden_ + 2 * qkv + 2 * q_out + 3 * inter + hidden);
  workspace_ = backend_->alloc(static_cast<size_t>(floats) * sizeof(float));
  float* cursor = static_cast<float*>(workspace_.data());
  const Device device = workspace_.device();
  const auto carve = [&](int64_t width) {
    Tensor t(cursor, DType::kF32, {tokens, width}, device);
    cursor += tokens * width;
    return t;
  };
  e_ = carve(hidden), h_ = carve(hidden), residual_ = carve(hidden), en_ = carve(hidden), hn_ = carve(hidden);
  in3_ = carve(3 * target_hidden_);
  qkv_ = carve(qkv), qkv_b_ = carve(qkv), q_ = carve(q_out), attn_ = carve(q_out);
  gate_up_out_ = carve(2 * inter), act_ = carve(inter), proj_ = carve(hidden);
  // The next step reads this one's outputs: its own buffer, copied when it grows.
  Buffer grown = backend_->alloc(static_cast<size_t>(tokens * hidden) * sizeof(float));
  Tensor next(grown.data(), DType::kF32, {tokens, hidden}, grown.device());
  if (tokens_ > 0) backend_->copy(next.slice_rows(0, tokens_), hidden_out_);
  hidden_out_buffer_ = std::move(grown);
  hidden_out_ = next;
  tokens_ = tokens;
}

void Eagle3Model::forward(const StepInputs& inputs, StepMemory& memory, Tensor logits) {
  const int64_t tokens = inputs.token_ids.numel(), rows = inputs.logit_rows.numel();
  RS_CHECK(!embedding_.empty() && !features_.empty(), "EAGLE-3 head used before bind_target()");
  RS_CHECK(inputs.feature_rows.numel() == tokens, "EAGLE-3 step of {} tokens has {} feature rows", tokens,
           inputs.feature_rows.numel());
  ensure(tokens);
  const float eps = static_cast<float>(config_.rms_norm_eps);
  const auto rows_of = [&](const Tensor& t) { return t.slice_rows(0, tokens); };
  Tensor e = rows_of(e_), h = rows_of(h_), residual = rows_of(residual_), en = rows_of(en_), hn = rows_of(hn_);
  Tensor qkv = rows_of(qkv_), qkv_b = rows_of(qkv_b_), attn = rows_of(attn_), proj = rows_of(proj_);
  backend_->embedding(embedding_, inputs.token_ids, e);
  if (inputs.features_from_target) {
    Tensor in3 = rows_of(in3_);
    backend_->gather_rows(features_, inputs.feature_rows, in3);
    backend_->linear(in3, fc_, Tensor(), h);
  } else {
    backend_->gather_rows(hidden_out_, inputs.feature_rows, h);
  }
  backend_->rms_norm(e, input_norm_, eps, false, en);
  backend_->rms_norm(h, hidden_norm_, eps, false, hn);
  backend_->linear(en, qkv_embed_, Tensor(), qkv);
  backend_->linear(hn, qkv_hidden_, Tensor(), qkv_b);
  backend_->add(qkv, qkv_b, qkv);
  const int64_t heads = config_.num_heads, hd = config_.head_dim;
  Tensor q3 = rows_of(q_).view({tokens, heads, hd});
  memory::KvPool& kv = memory.kv;
  const BatchView& view = inputs.groups[kv.group_of_layer(0)];
  const AttentionParams params{static_cast<int32_t>(heads),
                               static_cast<int32_t>(config_.num_kv_heads),
                               static_cast<int32_t>(hd),
                               1.0f / std::sqrt(static_cast<float>(hd)),
                               0,
                               Tensor()};
  backend_->qkv_attention(qkv, QkvNormRope{Tensor(), Tensor(), eps, rope_, rotary_dim_}, kv.cache(0), view, params, q3,
                          attn);
  backend_->linear(attn, o_, Tensor(), proj);
  // residual = h + attention; en = post_attention_layernorm(residual); residual += mlp(en)
  backend_->copy(residual, h);
  backend_->add_rms_norm(residual, proj, post_norm_, eps, false, en);
  const int64_t inter = down_.in_features;
  backend_->linear_silu_mul(en, gate_up_, rows_of(gate_up_out_).view({tokens, 2 * inter}),
                            rows_of(act_).view({tokens, inter}));
  backend_->linear(rows_of(act_).view({tokens, inter}), down_, Tensor(), proj);
  Tensor out = hidden_out_.slice_rows(0, tokens);
  backend_->add(residual, proj, out);
  Tensor last = en_.slice_rows(0, rows);
  backend_->gather_rows(out, inputs.logit_rows, last);
  backend_->rms_norm(last, norm_, eps, false, last);
  backend_->linear(last, lm_head_, Tensor(), logits);
}

}  // namespace

std::unique_ptr<Model> make_eagle3(const loader::ModelConfig& config) {
  RS_CHECK(config.is_eagle3() && config.num_layers == 1, "{} is not an EAGLE-3 head", config.architecture);
  RS_CHECK(config.eagle_target_hidden > 0 && config.intermediate_size > 0, "EAGLE-3 head without sizes");
  const auto& raw = config.raw;
  const bool plain_act = !raw.contains("hidden_act") || raw["hidden_act"] == "silu";
  const bool mlp_bias = raw.contains("mlp_bias") && raw["mlp_bias"] == true;
  RS_CHECK(!config.attention_bias && !mlp_bias && plain_act,
           "EAGLE-3 head with attention_bias, mlp_bias or a hidden_act other than silu: only the plain Llama layer is "
           "supported");
  return std::make_unique<Eagle3Model>(config);
}

}  // namespace rs::model
