#include "model/blocks/gated_delta_net.h"

namespace rs::model {

std::unique_ptr<GatedDeltaNet> GatedDeltaNet::load(WeightBuilder& build, const loader::ModelConfig& config,
                                                   const std::string& prefix) {
  const loader::LinearAttentionConfig& lc = config.linear;
  std::unique_ptr<GatedDeltaNet> gdn(new GatedDeltaNet(lc, static_cast<float>(config.rms_norm_eps)));
  loader::WeightSource& weights = build.source();
  const int64_t hidden = config.hidden_size, nk = lc.num_key_heads, nv = lc.num_value_heads;
  const int64_t dk = lc.key_head_dim, dv = lc.value_head_dim, ratio = nv / nk;
  const int64_t key_dim = lc.key_dim(), value_dim = lc.value_dim(), channels = lc.conv_channels();
  const std::string p = prefix + "linear_attn.";
  const bool fused = weights.contains(p + "in_proj_qkvz.weight");
  if (fused) {
    // Qwen3-Next groups rows per key head g: [q_g (dk) | k_g (dk) | v_g (ratio dv) | z_g (ratio dv)], and
    // in_proj_ba per key head: [b_g (ratio) | a_g (ratio)]. Reorder into q | k | v, z and b | a.
    const LinearWeight qkvz = build.dense(p + "in_proj_qkvz.weight", 2 * key_dim + 2 * value_dim, hidden);
    const LinearWeight ba = build.dense(p + "in_proj_ba.weight", 2 * nv, hidden);
    const int64_t group = 2 * dk + 2 * ratio * dv;
    std::vector<int64_t> q_rows, k_rows, v_rows, z_rows, b_rows, a_rows;
    for (int64_t g = 0; g < nk; ++g) {
      for (int64_t i = 0; i < dk; ++i) q_rows.push_back(g * group + i), k_rows.push_back(g * group + dk + i);
      for (int64_t i = 0; i < ratio * dv; ++i)
        v_rows.push_back(g * group + 2 * dk + i), z_rows.push_back(g * group + 2 * dk + ratio * dv + i);
      for (int64_t j = 0; j < ratio; ++j)
        b_rows.push_back(g * 2 * ratio + j), a_rows.push_back(g * 2 * ratio + ratio + j);
    }
    std::vector<int64_t> qkv_rows = q_rows;
    qkv_rows.insert(qkv_rows.end(), k_rows.begin(), k_rows.end());
    qkv_rows.insert(qkv_rows.end(), v_rows.begin(), v_rows.end());
    b_rows.insert(b_rows.end(), a_rows.begin(), a_rows.end());
    gdn->in_qkv_ = build.select_rows(qkvz, qkv_rows);
    gdn->in_z_ = build.select_rows(qkvz, z_rows);
    gdn->in_ba_ = build.select_rows(ba, b_rows);
  } else {
    // Qwen3.5: in_proj_qkv is already q | k | v; z, b and a are separate projections.
    gdn->in_qkv_ = build.dense(p + "in_proj_qkv.weight", channels, hidden);
    gdn->in_z_ = build.dense(p + "in_proj_z.weight", value_dim, hidden);
    gdn->in_ba_ = build.concat(
        {build.dense(p + "in_proj_b.weight", nv, hidden), build.dense(p + "in_proj_a.weight", nv, hidden)});
  }
  gdn->out_ = build.dense(p + "out_proj.weight", hidden, value_dim);
  // Hugging Face stores the depthwise kernel [C, 1, K]; mlx_lm [C, K, 1]. Both hold each channel's K taps in order.
  const auto conv_info = weights.info(p + "conv1d.weight");
  const bool mlx_conv = conv_info && conv_info->shape == std::vector<int64_t>{channels, lc.conv_kernel, 1};
  gdn->conv_weight_ =
      build
          .to_f32(weights.require(p + "conv1d.weight", mlx_conv ? std::vector<int64_t>{channels, lc.conv_kernel, 1}
                                                                : std::vector<int64_t>{channels, 1, lc.conv_kernel}))
          .view({channels, lc.conv_kernel});
  gdn->a_log_ = build.to_f32(weights.require(p + "A_log", {nv}));
  gdn->dt_bias_ = build.to_f32(weights.require(p + "dt_bias", {nv}));
  gdn->norm_ = weights.require(p + "norm.weight", {dv});
  return gdn;
}

void GatedDeltaNet::visit(WeightVisitor& visitor) {
  for (LinearWeight* w : {&in_qkv_, &in_z_, &in_ba_, &out_}) visitor.linear(*w, true);
  for (Tensor* t : {&conv_weight_, &a_log_, &dt_bias_, &norm_}) visitor.tensor(*t);
}

ScratchNeed GatedDeltaNet::scratch_need() const {
  return {2 * shape_.conv_channels() + 2 * shape_.value_dim() + 2 * shape_.num_value_heads, 5};
}

void GatedDeltaNet::run(const LayerStep& step, const Tensor& h, Tensor out) {
  RS_CHECK(step.memory.state != nullptr, "layer {} keeps recurrent state but the step has no state pool", step.layer);
  memory::StatePool& state = *step.memory.state;
  Backend& backend = step.backend;
  const int64_t tokens = h.dim(0), nv = shape_.num_value_heads, dv = shape_.value_head_dim;
  Tensor mixed = step.scratch.take(DType::kF32, {tokens, shape_.conv_channels()});
  Tensor conv = step.scratch.take(DType::kF32, {tokens, shape_.conv_channels()});
  Tensor z = step.scratch.take(DType::kF32, {tokens, shape_.value_dim()});
  Tensor ba = step.scratch.take(DType::kF32, {tokens, 2 * nv});
  Tensor core = step.scratch.take(DType::kF32, {tokens, shape_.value_dim()});
  backend.linear(h, in_qkv_, Tensor(), mixed);
  backend.linear(h, in_z_, Tensor(), z);
  backend.linear(h, in_ba_, Tensor(), ba);
  backend.causal_conv1d(mixed, conv_weight_, state.conv_state(step.layer), step.inputs.state, conv);
  const GatedDeltaNetParams params{shape_.num_key_heads, shape_.num_value_heads, shape_.key_head_dim,
                                   shape_.value_head_dim};
  backend.gated_delta_rule(conv, ba, a_log_, dt_bias_, state.recurrent_state(step.layer), step.inputs.state, params,
                           core);
  Tensor heads = core.view({tokens * nv, dv});
  backend.gated_rms_norm(heads, z.view({tokens * nv, dv}), norm_, eps_, heads);
  backend.linear(core, out_, Tensor(), out);
}

}  // namespace rs::model
