// DFlash block-diffusion drafters (DFlashDraftModel, z-lab/dflash; arXiv 2602.06036): a few Qwen3 decoder layers
// that denoise a block of positions [last committed token, mask, ..., mask] in one forward and predict the token at
// each mask position. A step's rows per sequence are its new context rows (committed positions the drafter has not
// seen; their K/V come from the target's hidden states: ctx = hidden_norm(fc(taps)), the same input at every layer)
// followed by the block rows (token embeddings through the layers). Attention is not causal: a block row sees every
// cached context key and the whole block. Both kinds of row take one q|k|v projection: block rows of their normed
// residual, context rows of ctx, scattered over theirs (a context row's query and output are never read). The
// embedding table and the LM head are the target's (bind_target). The block's K/V land past the committed length and
// are overwritten by the next step's rows (z-lab's cache crop costs nothing here).
#include <cstring>

#include "model/architectures.h"
#include "model/blocks/attention.h"
#include "model/blocks/feed_forward.h"
#include "model/blocks/weight_visitors.h"
#include "model/rope_table.h"
#include "model/weight_builder.h"

namespace rs::model {
namespace {

class DFlashModel final : public Model, public DraftHead {
 public:
  explicit DFlashModel(const loader::ModelConfig& config) : config_(config) {}

  void load(loader::WeightSource& weights, Backend& backend, const ProgressFn& progress) override;
  void reserve(int64_t max_tokens) override { ensure(max_tokens); }
  void forward(const StepInputs& inputs, StepMemory& memory, Tensor logits) override;
  DraftHead* draft_head() override { return this; }
  void bind_target(const SharedWeights& target, const Tensor& features) override;
  std::vector<int32_t> draft_to_target() const override { return {}; }

 private:
  struct Layer {
    Tensor input_norm, post_norm;
    std::unique_ptr<Attention> attention;
    std::unique_ptr<DenseMlp> mlp;
  };
  void ensure(int64_t tokens);

  const loader::ModelConfig config_;
  Backend* backend_ = nullptr;
  std::vector<Buffer> owned_;
  int64_t taps_width_ = 0;  // target layers tapped x hidden
  Tensor embedding_, features_;
  LinearWeight lm_head_;
  std::vector<Layer> layers_;
  LinearWeight fc_;
  Tensor hidden_norm_, norm_;
  RopeTable rope_;
  int64_t tokens_ = 0;
  size_t scratch_offset_ = 0, scratch_bytes_ = 0;
  Buffer workspace_;
  Tensor x_, h_, proj_, taps_, ctx_;
};

void DFlashModel::load(loader::WeightSource& weights, Backend& backend, const ProgressFn& progress) {
  backend_ = &backend;
  WeightBuilder build(config_, weights, backend, owned_);
  const int64_t hidden = config_.hidden_size;
  taps_width_ = static_cast<int64_t>(config_.dflash.target_layer_ids.size()) * hidden;
  // z-lab's releases name the tensors "layers.*", "fc.*", "norm.*"; a conversion may prefix them with "model.".
  const std::string p = weights.contains("model.fc.weight") ? "model." : "";
  fc_ = build.dense(p + "fc.weight", hidden, taps_width_);
  hidden_norm_ = build.norm_weight(p + "hidden_norm.weight", hidden);
  norm_ = build.norm_weight(p + "norm.weight", hidden);
  for (int32_t i = 0; i < config_.num_layers; ++i) {
    const std::string prefix = p + "layers." + std::to_string(i) + ".";
    Layer layer;
    layer.input_norm = build.norm_weight(prefix + "input_layernorm.weight", hidden);
    layer.post_norm = build.norm_weight(prefix + "post_attention_layernorm.weight", hidden);
    const AttentionOptions options{.qk_norm = true, .causal = config_.dflash.causal[i]};
    layer.attention = Attention::load(build, config_, prefix, i, options, rope_);
    layer.mlp = DenseMlp::load(build, prefix + "mlp.", hidden, config_.intermediate_size);
    layers_.push_back(std::move(layer));
    if (progress) progress("loading weights", (i + 1.0) / (config_.num_layers + 1.0));
  }
  rope_.rotary_dim = static_cast<int32_t>(config_.head_dim * config_.rope.partial_rotary_factor);
  const int64_t positions = std::min<int64_t>(config_.max_position_embeddings, 1 << 18);
  std::vector<float> table = rope_cos_sin_table(config_.rope, rope_.rotary_dim, positions);
  Buffer host = Buffer::host(table.size() * sizeof(float));
  std::memcpy(host.data(), table.data(), host.bytes());
  rope_.table = build.keep(std::move(host), DType::kF32, {positions, rope_.rotary_dim});
  const auto visit_all = [&](WeightVisitor& visitor) {
    for (Tensor* t : {&hidden_norm_, &norm_, &rope_.table}) visitor.tensor(*t);
    visitor.linear(fc_, true);
    for (Layer& layer : layers_) {
      visitor.tensor(layer.input_norm);
      visitor.tensor(layer.post_norm);
      layer.attention->visit(visitor);
      layer.mlp->visit(visitor);
    }
  };
  if (!backend.device().is_cpu()) {
    Uploader upload(backend, owned_);
    visit_all(upload);
  }
  Preparer prepare(backend, owned_, /*experts_only=*/false);
  visit_all(prepare);
  if (progress) progress("loading weights", 1.0);
}

void DFlashModel::bind_target(const SharedWeights& target, const Tensor& features) {
  RS_CHECK(features.ndim() == 2 && features.dim(1) == taps_width_ && features.dtype() == DType::kF32,
           "DFlash drafter reading {} target layers of hidden size {} given features {}",
           config_.dflash.target_layer_ids.size(), config_.hidden_size, features.shape_string());
  RS_CHECK(!target.embedding.empty(),
           "the target's embedding table is quantized (an MLX checkpoint): DFlash drafters read a float table");
  RS_CHECK(target.embedding.ndim() == 2 && target.embedding.dim(0) == config_.vocab_size &&
               target.embedding.dim(1) == config_.hidden_size,
           "the target's embedding table {} does not fit the DFlash drafter's [{}, {}]",
           target.embedding.shape_string(), config_.vocab_size, config_.hidden_size);
  RS_CHECK(target.head != nullptr && target.head->out_features == config_.vocab_size &&
               target.head->in_features == config_.hidden_size,
           "the DFlash drafter drafts through its target's LM head, which has none of [{}, {}]", config_.vocab_size,
           config_.hidden_size);
  embedding_ = target.embedding;
  lm_head_ = *target.head;
  features_ = features;
}

void DFlashModel::ensure(int64_t tokens) {
  if (tokens <= tokens_) return;
  const int64_t hidden = config_.hidden_size;
  ScratchNeed scratch;
  for (const Layer& layer : layers_)
    scratch = scratch.covering(layer.attention->scratch_need()).covering(layer.mlp->scratch_need());
  const int64_t floats = tokens * (4 * hidden + taps_width_);
  scratch_offset_ =
      (static_cast<size_t>(floats) * sizeof(float) + Scratch::kAlign - 1) / Scratch::kAlign * Scratch::kAlign;
  scratch_bytes_ = Scratch::bytes_for(scratch, tokens);
  workspace_ = backend_->alloc(scratch_offset_ + scratch_bytes_);
  float* cursor = static_cast<float*>(workspace_.data());
  const Device device = workspace_.device();
  const auto carve = [&](int64_t width) {
    Tensor t(cursor, DType::kF32, {tokens, width}, device);
    cursor += tokens * width;
    return t;
  };
  x_ = carve(hidden), h_ = carve(hidden), proj_ = carve(hidden), ctx_ = carve(hidden), taps_ = carve(taps_width_);
  tokens_ = tokens;
}

void DFlashModel::forward(const StepInputs& inputs, StepMemory& memory, Tensor logits) {
  const int64_t tokens = inputs.token_ids.numel(), contexts = inputs.feature_rows.numel();
  RS_CHECK(!embedding_.empty() && !features_.empty(), "DFlash drafter used before bind_target()");
  RS_CHECK(inputs.feature_tokens.numel() == contexts, "DFlash step of {} context rows names {} of their tokens",
           contexts, inputs.feature_tokens.numel());
  ensure(tokens);
  const float eps = static_cast<float>(config_.rms_norm_eps);
  const auto rows_of = [&](const Tensor& t) { return t.slice_rows(0, tokens); };
  Tensor x = rows_of(x_), h = rows_of(h_), proj = rows_of(proj_);
  Scratch scratch(static_cast<char*>(workspace_.data()) + scratch_offset_, scratch_bytes_, workspace_.device());
  backend_->embedding(embedding_, inputs.token_ids, x);
  Tensor ctx;
  if (contexts > 0) {  // the context rows' K/V input: hidden_norm(fc(the target's tapped states))
    Tensor taps = taps_.slice_rows(0, contexts);
    ctx = ctx_.slice_rows(0, contexts);
    backend_->gather_rows(features_, inputs.feature_rows, taps);
    backend_->linear(taps, fc_, Tensor(), ctx);
    backend_->rms_norm(ctx, hidden_norm_, eps, false, ctx);
  }
  for (size_t i = 0; i < layers_.size(); ++i) {
    Layer& layer = layers_[i];
    const LayerStep step{static_cast<int32_t>(i), inputs, memory, *backend_, scratch};
    if (i == 0) backend_->rms_norm(x, layer.input_norm, eps, false, h);
    if (contexts > 0) backend_->scatter_rows(ctx, inputs.feature_tokens, h, 0);
    scratch.reset();
    layer.attention->run(step, h, proj);
    backend_->add_rms_norm(x, proj, layer.post_norm, eps, false, h);  // x += attention; h = norm(x)
    scratch.reset();
    layer.mlp->run(step, h, proj);
    if (i + 1 < layers_.size()) {
      backend_->add_rms_norm(x, proj, layers_[i + 1].input_norm, eps, false, h);
    } else {
      backend_->add(x, proj, x);
    }
  }
  Tensor last = h_.slice_rows(0, inputs.logit_rows.numel());
  backend_->gather_rows(x, inputs.logit_rows, last);
  backend_->rms_norm(last, norm_, eps, false, last);
  // z-lab's output_multiplier and final_logit_softcapping leave each row's argmax, all that greedy drafting reads.
  backend_->linear(last, lm_head_, Tensor(), logits);
}

}  // namespace

std::unique_ptr<Model> make_dflash(const loader::ModelConfig& config) {
  RS_CHECK(config.is_dflash() && config.num_layers >= 1, "{} is not a DFlash drafter", config.architecture);
  const auto& raw = config.raw;
  const bool plain_act = !raw.contains("hidden_act") || raw["hidden_act"] == "silu";
  RS_CHECK(!config.attention_bias && plain_act && config.head_dim > 0 && config.intermediate_size > 0,
           "DFlash drafter with attention_bias or a hidden_act other than silu: only Qwen3 layers are supported");
  RS_CHECK(static_cast<int32_t>(config.dflash.causal.size()) == config.num_layers,
           "DFlash drafter without layer kinds");
  return std::make_unique<DFlashModel>(config);
}

}  // namespace rs::model
