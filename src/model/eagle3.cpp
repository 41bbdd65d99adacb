// EAGLE-3 draft heads (LlamaForCausalLMEagle3, as SGLang loads them): one Llama decoder layer whose attention reads
// the concatenation [input_layernorm(embed(token)) | hidden_norm(h)], where h is the target's residual stream at
// three layers for the token's position, projected by fc [hidden, 3 target_hidden] (a step fed by the target), or the
// head's own pre-norm output of its previous step (a draft step). Residual = h; the layer's attention and MLP add to
// it; logits = lm_head(norm(residual)) over draft_vocab_size tokens, mapped to target ids by d2t (target = d + d2t[d]).
// The head keeps its pre-norm output of every token of the last step for the next step to read. Token embeddings are
// the target's (bind_target), as SGLang shares them; so is the LM head of heads that have none of their own
// (ModelConfig::eagle_lm_head).
#include <algorithm>
#include <cstring>

#include "model/architectures.h"
#include "model/blocks/attention.h"
#include "model/blocks/feed_forward.h"
#include "model/blocks/weight_visitors.h"
#include "model/rope_table.h"
#include "model/weight_builder.h"

namespace rs::model {
namespace {

class Eagle3Model final : public Model, public DraftHead {
 public:
  explicit Eagle3Model(const loader::ModelConfig& config) : config_(config) {}

  void load(loader::WeightSource& weights, Backend& backend, const ProgressFn& progress) override;
  void reserve(int64_t max_tokens) override { ensure(max_tokens); }
  void forward(const StepInputs& inputs, StepMemory& memory, Tensor logits) override;
  DraftHead* draft_head() override { return this; }
  void bind_target(const SharedWeights& target, const Tensor& features) override;
  std::vector<int32_t> draft_to_target() const override { return draft_to_target_; }

 private:
  // Columns [begin, begin + count) of a [rows, in] weight, as a new host tensor owned by `build`.
  static Tensor columns(WeightBuilder& build, const Tensor& weight, int64_t begin, int64_t count);
  void ensure(int64_t tokens);

  const loader::ModelConfig config_;
  Backend* backend_ = nullptr;
  std::vector<Buffer> owned_;
  int64_t target_hidden_ = 0;
  Tensor embedding_, features_;  // the target's (bind_target)
  // The decoder layer's blocks: attention of q|k|v projected from [embeds | hidden] (below), and the MLP.
  std::unique_ptr<Attention> attention_;
  std::unique_ptr<DenseMlp> mlp_;
  LinearWeight fc_, qkv_embed_, qkv_hidden_, lm_head_;
  Tensor input_norm_, hidden_norm_, post_norm_, norm_;
  RopeTable rope_;
  std::vector<int32_t> draft_to_target_;
  int64_t tokens_ = 0;
  size_t scratch_offset_ = 0, scratch_bytes_ = 0;
  Buffer workspace_, hidden_out_buffer_;
  Tensor e_, in3_, h_, residual_, en_, hn_, qkv_, qkv_b_, proj_, hidden_out_;
};

Tensor Eagle3Model::columns(WeightBuilder& build, const Tensor& weight, int64_t begin, int64_t count) {
  const int64_t rows = weight.dim(0), in = weight.dim(1);
  const size_t elem = weight.bytes() / static_cast<size_t>(weight.numel());
  Buffer buffer = Buffer::host(static_cast<size_t>(rows * count) * elem);
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(static_cast<char*>(buffer.data()) + r * count * elem,
                static_cast<const char*>(weight.data()) + (r * in + begin) * elem, count * elem);
  return build.keep(std::move(buffer), weight.dtype(), {rows, count});
}

void Eagle3Model::load(loader::WeightSource& weights, Backend& backend, const ProgressFn& progress) {
  backend_ = &backend;
  WeightBuilder build(config_, weights, backend, owned_);
  const int64_t hidden = config_.hidden_size, hd = config_.head_dim;
  const int64_t q_out = config_.num_heads * hd, kv_out = config_.num_kv_heads * hd;
  target_hidden_ = config_.eagle_target_hidden;
  // Releases name the tensors "midlayer.*", "fc.*", "norm.*"; some conversions prefix them with "model.".
  const std::string p = weights.contains("model.midlayer.input_layernorm.weight") ? "model." : "";
  fc_ = build.dense(p + "fc.weight", hidden, 3 * target_hidden_);
  const std::string m = p + "midlayer.";
  input_norm_ = weights.require(m + "input_layernorm.weight", {hidden});
  hidden_norm_ = weights.require(m + "hidden_norm.weight", {hidden});
  post_norm_ = weights.require(m + "post_attention_layernorm.weight", {hidden});
  // q/k/v read [embeds | hidden]: split by input columns into two projections summed, so no concatenation is needed.
  const Tensor q = weights.require(m + "self_attn.q_proj.weight", {q_out, 2 * hidden});
  const Tensor k = weights.require(m + "self_attn.k_proj.weight", {kv_out, 2 * hidden});
  const Tensor v = weights.require(m + "self_attn.v_proj.weight", {kv_out, 2 * hidden});
  qkv_embed_ =
      build.concat_rows({columns(build, q, 0, hidden), columns(build, k, 0, hidden), columns(build, v, 0, hidden)});
  qkv_hidden_ = build.concat_rows(
      {columns(build, q, hidden, hidden), columns(build, k, hidden, hidden), columns(build, v, hidden, hidden)});
  attention_ = Attention::load_projected(build, config_, m, 0, rope_);
  mlp_ = DenseMlp::load(build, m + "mlp.", hidden, config_.intermediate_size);
  norm_ = weights.require(p + "norm.weight", {hidden});
  const int64_t draft_vocab = config_.draft_vocab_size;
  const bool own_head = config_.eagle_lm_head == loader::ModelConfig::EagleLmHead::kOwn;
  if (own_head) lm_head_ = build.dense("lm_head.weight", draft_vocab, hidden);
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
  rope_.rotary_dim = static_cast<int32_t>(hd * config_.rope.partial_rotary_factor);
  const int64_t positions = std::min<int64_t>(config_.max_position_embeddings, 1 << 18);
  std::vector<float> table = rope_cos_sin_table(config_.rope, rope_.rotary_dim, positions);
  Buffer host = Buffer::host(table.size() * sizeof(float));
  std::memcpy(host.data(), table.data(), host.bytes());
  rope_.table = build.keep(std::move(host), DType::kF32, {positions, rope_.rotary_dim});
  if (!backend.device().is_cpu()) {
    Uploader upload(backend, owned_);
    for (Tensor* t : {&input_norm_, &hidden_norm_, &post_norm_, &norm_, &rope_.table}) upload.tensor(*t);
    for (LinearWeight* w : {&fc_, &qkv_embed_, &qkv_hidden_, &lm_head_}) upload.linear(*w, true);
    attention_->visit(upload);
    mlp_->visit(upload);
  }
  Preparer prepare(backend, owned_, /*experts_only=*/false);
  for (LinearWeight* w : {&fc_, &lm_head_}) prepare.linear(*w, true);
  attention_->visit(prepare);
  mlp_->visit(prepare);
  if (progress) progress("loading weights", 1.0);
}

void Eagle3Model::bind_target(const SharedWeights& target, const Tensor& features) {
  const Tensor embedding = target.embedding;
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
    const LinearWeight* head = target.head;
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
  const int64_t qkv = (config_.num_heads + 2 * config_.num_kv_heads) * hd;
  const int64_t floats = tokens * (6 * hidden + 3 * target_hidden_ + 2 * qkv);
  const ScratchNeed scratch = attention_->scratch_need().covering(mlp_->scratch_need());
  scratch_offset_ = static_cast<size_t>(floats) * sizeof(float);
  scratch_offset_ = (scratch_offset_ + Scratch::kAlign - 1) / Scratch::kAlign * Scratch::kAlign;
  scratch_bytes_ = Scratch::bytes_for(scratch, tokens);
  workspace_ = backend_->alloc(scratch_offset_ + scratch_bytes_);
  float* cursor = static_cast<float*>(workspace_.data());
  const Device device = workspace_.device();
  const auto carve = [&](int64_t width) {
    Tensor t(cursor, DType::kF32, {tokens, width}, device);
    cursor += tokens * width;
    return t;
  };
  e_ = carve(hidden), h_ = carve(hidden), residual_ = carve(hidden), en_ = carve(hidden), hn_ = carve(hidden);
  proj_ = carve(hidden), in3_ = carve(3 * target_hidden_), qkv_ = carve(qkv), qkv_b_ = carve(qkv);
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
  Tensor qkv = rows_of(qkv_), qkv_b = rows_of(qkv_b_), proj = rows_of(proj_);
  Scratch scratch(static_cast<char*>(workspace_.data()) + scratch_offset_, scratch_bytes_, workspace_.device());
  const LayerStep step{0, inputs, memory, *backend_, scratch};
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
  attention_->run_projected(step, qkv, proj);
  // residual = h + attention; en = post_attention_layernorm(residual); residual += mlp(en)
  backend_->copy(residual, h);
  backend_->add_rms_norm(residual, proj, post_norm_, eps, false, en);
  scratch.reset();
  mlp_->run(step, en, proj);
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
