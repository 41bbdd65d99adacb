#include "model/blocks/feed_forward.h"

namespace rs::model {

std::unique_ptr<DenseMlp> DenseMlp::load(WeightBuilder& build, const std::string& mlp, int64_t hidden, int64_t inter) {
  RS_CHECK(inter > 0, "config.json: a dense MLP ({}) needs a positive intermediate size", mlp);
  auto block = std::make_unique<DenseMlp>();
  block->gate_up_ = build.concat(
      {build.dense(mlp + "gate_proj.weight", inter, hidden), build.dense(mlp + "up_proj.weight", inter, hidden)});
  block->down_ = build.dense(mlp + "down_proj.weight", hidden, inter);
  return block;
}

void DenseMlp::visit(WeightVisitor& visitor) {
  visitor.linear(gate_up_, true);
  visitor.linear(down_, true);
}

void DenseMlp::run(const LayerStep& step, const Tensor& h, Tensor out) {
  const int64_t tokens = h.dim(0), inter = down_.in_features;
  // The SwiGLU output feeds only the down projection: it takes h's dtype (Backend::linear_input_dtype).
  Tensor gate_up = step.scratch.take(DType::kF32, {tokens, 2 * inter});
  Tensor act = step.scratch.take(h.dtype(), {tokens, inter});
  step.backend.linear_silu_mul(h, gate_up_, gate_up, act);
  step.backend.linear(act, down_, Tensor(), out);
}

MoeWeights load_swiglu_experts(WeightBuilder& build, const std::string& mlp, int32_t count, int64_t hidden,
                               int64_t inter) {
  MoeWeights experts;
  experts.activation = MoeActivation::kSwiGlu;
  const WeightBuilder::ExpertRange local = build.local_experts(count);
  experts.first_expert = local.first;
  experts.total_experts = count;
  loader::WeightSource& weights = build.source();
  if (weights.contains(mlp + "experts.gate_up_proj")) {
    const Tensor gate_up = weights.require(mlp + "experts.gate_up_proj", {local.count, 2 * inter, hidden});
    const Tensor down = weights.require(mlp + "experts.down_proj", {local.count, hidden, inter});
    const auto rows_of = [](const Tensor& t, int64_t first_element, int64_t rows, int64_t cols) {
      char* base = static_cast<char*>(t.data()) + first_element * dtype_size(t.dtype());
      return LinearWeight{LinearWeight::Format::kDense, Tensor(base, t.dtype(), {rows, cols}), Tensor(), rows, cols};
    };
    for (int64_t e = 0; e < local.count; ++e) {
      experts.gate.push_back(rows_of(gate_up, e * 2 * inter * hidden, inter, hidden));
      experts.up.push_back(rows_of(gate_up, (e * 2 + 1) * inter * hidden, inter, hidden));
      experts.down.push_back(rows_of(down, e * hidden * inter, hidden, inter));
    }
    return experts;
  }
  for (int32_t e = local.first; e < local.first + local.count; ++e) {
    experts.gate.push_back(build.expert(mlp, e, count, "gate_proj", inter, hidden));
    experts.up.push_back(build.expert(mlp, e, count, "up_proj", inter, hidden));
    experts.down.push_back(build.expert(mlp, e, count, "down_proj", hidden, inter));
  }
  return experts;
}

MixtureOfExperts::MixtureOfExperts(LinearWeight router, Tensor router_bias, MoeWeights experts, MoeOptions options,
                                   std::unique_ptr<DenseMlp> shared, LinearWeight shared_gate)
    : router_(std::move(router)),
      router_bias_(std::move(router_bias)),
      experts_(std::move(experts)),
      options_(options),
      shared_(std::move(shared)),
      shared_gate_(std::move(shared_gate)) {
  RS_CHECK(options_.experts_per_token > 0, "a mixture of experts needs experts per token");
  RS_CHECK(!shared_ || shared_gate_.out_features == 1, "a shared expert needs its one-row gate");
}

void MixtureOfExperts::visit(WeightVisitor& visitor) {
  visitor.linear(router_, false);
  visitor.tensor(router_bias_);
  if (shared_) {
    shared_->visit(visitor);
    visitor.linear(shared_gate_, false);
  }
  visitor.experts(experts_);
}

ScratchNeed MixtureOfExperts::scratch_need() const {
  ScratchNeed need{router_.out_features + 2 * options_.experts_per_token, 3};
  if (shared_) {
    const ScratchNeed mlp = shared_->scratch_need();
    need.floats += mlp.floats + router_.in_features + 1;
    need.buffers += mlp.buffers + 2;
  }
  return need;
}

void MixtureOfExperts::run(const LayerStep& step, const Tensor& h, Tensor out) {
  const int64_t tokens = h.dim(0), experts = router_.out_features, topk = options_.experts_per_token;
  Backend& backend = step.backend;
  Tensor logits = step.scratch.take(DType::kF32, {tokens, experts});
  Tensor ids = step.scratch.take(DType::kI32, {tokens, topk});
  Tensor weights = step.scratch.take(DType::kF32, {tokens, topk});
  backend.linear(h, router_, router_bias_, logits);
  backend.moe(h, logits, options_.routing, options_.norm_topk_prob, experts_, ids, weights, out);
  if (!shared_) return;
  // out += sigmoid(shared_gate . h) * shared_expert(h)
  Tensor shared = step.scratch.take(DType::kF32, {tokens, out.dim(1)});
  Tensor gate = step.scratch.take(DType::kF32, {tokens, 1});
  shared_->run(step, h, shared);
  backend.linear(h, shared_gate_, Tensor(), gate);
  backend.sigmoid_mul(shared, gate, shared);
  backend.add(out, shared, out);
}

}  // namespace rs::model
