// gpt-oss (GptOssForCausalLM): per-layer sliding windows, learned per-head sinks, attention biases, YaRN RoPE, and
// MoE with a biased router (top-k logits -> softmax) and clamped SwiGLU experts, stored either as MXFP4 blocks
// (released checkpoints) or as dense [E, in, out] tensors (transformers' dequantized layout).
#include <cstring>

#include "model/architectures.h"
#include "model/blocks/feed_forward.h"
#include "model/decoder.h"

namespace rs::model {
namespace {

class GptOssModel final : public DecoderModel {
 public:
  explicit GptOssModel(const loader::ModelConfig& config)
      : DecoderModel(config, DecoderOptions{.attention = {.sinks = true}}) {}

 protected:
  std::unique_ptr<FeedForward> load_ffn(int32_t /*layer*/, const std::string& prefix, WeightBuilder& build) override {
    loader::WeightSource& weights = build.source();
    const int64_t hidden = config_.hidden_size, inter = config_.intermediate_size;
    const std::string p = prefix + "mlp.";
    LinearWeight router = build.dense(p + "router.weight", config_.num_experts, hidden, /*quantizable=*/false);
    Tensor router_bias = weights.require(p + "router.bias", {config_.num_experts});
    MoeWeights moe;
    // Expert parallelism: the stacked tensors below hold the rank's block of experts.
    const WeightBuilder::ExpertRange local = build.local_experts(config_.num_experts);
    moe.first_expert = local.first;
    moe.total_experts = config_.num_experts;
    const int64_t experts = local.count;
    moe.activation = MoeActivation::kClampedSwiGlu;
    moe.swiglu_limit = static_cast<float>(config_.swiglu_limit);
    moe.gate_up_bias = weights.require(p + "experts.gate_up_proj_bias", {experts, 2 * inter});
    moe.down_bias = weights.require(p + "experts.down_proj_bias", {experts, hidden});
    const bool mxfp4 = weights.contains(p + "experts.gate_up_proj_blocks");
    if (mxfp4) {
      RS_CHECK(hidden % 32 == 0 && inter % 32 == 0, "MXFP4 experts need hidden and intermediate sizes divisible by 32");
      Tensor gu_blocks =
          weights.require(p + "experts.gate_up_proj_blocks", {experts, 2 * inter, hidden / 32, 16}, DType::kU8);
      Tensor gu_scales =
          weights.require(p + "experts.gate_up_proj_scales", {experts, 2 * inter, hidden / 32}, DType::kU8);
      Tensor d_blocks = weights.require(p + "experts.down_proj_blocks", {experts, hidden, inter / 32, 16}, DType::kU8);
      Tensor d_scales = weights.require(p + "experts.down_proj_scales", {experts, hidden, inter / 32}, DType::kU8);
      for (int64_t e = 0; e < experts; ++e) {
        moe.gate_up.push_back(
            {LinearWeight::Format::kMxfp4, gu_blocks.select(e), gu_scales.select(e), 2 * inter, hidden});
        moe.down.push_back({LinearWeight::Format::kMxfp4, d_blocks.select(e), d_scales.select(e), hidden, inter});
      }
    } else {
      // transformers layout: gate_up_proj [E, H, 2I] and down_proj [E, I, H], applied as x @ W.
      Tensor gate_up =
          transpose_experts(build, weights.require(p + "experts.gate_up_proj", {experts, hidden, 2 * inter}));
      Tensor down = transpose_experts(build, weights.require(p + "experts.down_proj", {experts, inter, hidden}));
      for (int64_t e = 0; e < experts; ++e) {
        moe.gate_up.push_back({LinearWeight::Format::kDense, gate_up.select(e), Tensor(), 2 * inter, hidden});
        moe.down.push_back({LinearWeight::Format::kDense, down.select(e), Tensor(), hidden, inter});
      }
    }
    const MoeOptions options{MoeRouting::kTopKSoftmax, config_.norm_topk_prob, config_.num_experts_per_tok};
    return std::make_unique<MixtureOfExperts>(std::move(router), std::move(router_bias), std::move(moe), options);
  }

 private:
  // [E, rows, cols] -> [E, cols, rows], keeping the dtype.
  static Tensor transpose_experts(WeightBuilder& build, const Tensor& w) {
    const int64_t experts = w.dim(0), rows = w.dim(1), cols = w.dim(2);
    const size_t elem = dtype_size(w.dtype());
    Buffer buffer = Buffer::host(w.bytes());
    const char* src = static_cast<const char*>(w.data());
    char* dst = static_cast<char*>(buffer.data());
    for (int64_t e = 0; e < experts; ++e)
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c)
          std::memcpy(dst + ((e * cols + c) * rows + r) * elem, src + ((e * rows + r) * cols + c) * elem, elem);
    return build.keep(std::move(buffer), w.dtype(), {experts, cols, rows});
  }
};

}  // namespace

std::unique_ptr<Model> make_gpt_oss(const loader::ModelConfig& config) {
  RS_CHECK(config.num_experts > 0 && config.num_experts_per_tok > 0,
           "GptOssForCausalLM needs num_local_experts and num_experts_per_tok in config.json");
  RS_CHECK(config.quant_method.empty() || config.quant_method == "mxfp4",
           "GptOssForCausalLM: quantization '{}' is not supported (mxfp4 or none)", config.quant_method);
  return std::make_unique<GptOssModel>(config);
}

}  // namespace rs::model
