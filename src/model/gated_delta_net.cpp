// The gated-delta-net (linear attention) layer of the hybrid Qwen models (MODELS.md §1.6): loading both releases'
// projection layouts into one, and running it through the Backend's conv / delta-rule / gated-norm ops.
#include "model/decoder.h"

namespace rs::model {

void DecoderModel::load_gated_delta_net(const std::string& prefix, loader::WeightSource& weights,
                                        GatedDeltaNetWeights& gdn) {
  const loader::LinearAttentionConfig& lc = config_.linear;
  const int64_t hidden = config_.hidden_size, nk = lc.num_key_heads, nv = lc.num_value_heads;
  const int64_t dk = lc.key_head_dim, dv = lc.value_head_dim, ratio = nv / nk;
  const int64_t key_dim = lc.key_dim(), value_dim = lc.value_dim(), channels = lc.conv_channels();
  const std::string p = prefix + "linear_attn.";
  LinearLoader& linear = linears(weights);
  const bool fused = weights.contains(p + "in_proj_qkvz.weight");
  if (fused) {
    // Qwen3-Next groups rows per key head g: [q_g (dk) | k_g (dk) | v_g (ratio dv) | z_g (ratio dv)], and
    // in_proj_ba per key head: [b_g (ratio) | a_g (ratio)]. Reorder into q | k | v, z and b | a.
    const LinearWeight qkvz = dense(weights, p + "in_proj_qkvz.weight", 2 * key_dim + 2 * value_dim, hidden);
    const LinearWeight ba = dense(weights, p + "in_proj_ba.weight", 2 * nv, hidden);
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
    gdn.in_qkv = linear.select_rows(qkvz, qkv_rows);
    gdn.in_z = linear.select_rows(qkvz, z_rows);
    gdn.in_ba = linear.select_rows(ba, b_rows);
  } else {
    // Qwen3.5: in_proj_qkv is already q | k | v; z, b and a are separate projections.
    gdn.in_qkv = dense(weights, p + "in_proj_qkv.weight", channels, hidden);
    gdn.in_z = dense(weights, p + "in_proj_z.weight", value_dim, hidden);
    gdn.in_ba = concat(
        {dense(weights, p + "in_proj_b.weight", nv, hidden), dense(weights, p + "in_proj_a.weight", nv, hidden)});
  }
  gdn.out = dense(weights, p + "out_proj.weight", hidden, value_dim);
  // Hugging Face stores the depthwise kernel [C, 1, K]; mlx_lm [C, K, 1]. Both hold each channel's K taps in order.
  const auto conv_info = weights.info(p + "conv1d.weight");
  const bool mlx_conv = conv_info && conv_info->shape == std::vector<int64_t>{channels, lc.conv_kernel, 1};
  gdn.conv_weight =
      to_f32(weights.require(p + "conv1d.weight", mlx_conv ? std::vector<int64_t>{channels, lc.conv_kernel, 1}
                                                           : std::vector<int64_t>{channels, 1, lc.conv_kernel}))
          .view({channels, lc.conv_kernel});
  gdn.a_log = to_f32(weights.require(p + "A_log", {nv}));
  gdn.dt_bias = to_f32(weights.require(p + "dt_bias", {nv}));
  gdn.norm = weights.require(p + "norm.weight", {dv});
}

void DecoderModel::run_gated_delta_net(int32_t layer, const StepInputs& inputs, memory::StatePool& state, Tensor out) {
  const loader::LinearAttentionConfig& lc = config_.linear;
  const GatedDeltaNetWeights& gdn = layers_[layer].gdn;
  const int64_t tokens = inputs.token_ids.numel(), nv = lc.num_value_heads, dv = lc.value_head_dim;
  Tensor h = h_.slice_rows(0, tokens);
  Tensor mixed = gdn_mixed_.slice_rows(0, tokens), conv = gdn_conv_.slice_rows(0, tokens);
  Tensor z = gdn_z_.slice_rows(0, tokens), ba = gdn_ba_.slice_rows(0, tokens), core = gdn_core_.slice_rows(0, tokens);
  backend_->linear(h, gdn.in_qkv, Tensor(), mixed);
  backend_->linear(h, gdn.in_z, Tensor(), z);
  backend_->linear(h, gdn.in_ba, Tensor(), ba);
  backend_->causal_conv1d(mixed, gdn.conv_weight, state.conv_state(layer), inputs.state, conv);
  const GatedDeltaNetParams params{lc.num_key_heads, lc.num_value_heads, lc.key_head_dim, lc.value_head_dim};
  backend_->gated_delta_rule(conv, ba, gdn.a_log, gdn.dt_bias, state.recurrent_state(layer), inputs.state, params,
                             core);
  Tensor heads = core.view({tokens * nv, dv});
  backend_->gated_rms_norm(heads, z.view({tokens * nv, dv}), gdn.norm, static_cast<float>(config_.rms_norm_eps), heads);
  backend_->linear(core, gdn.out, Tensor(), out);
}

}  // namespace rs::model
