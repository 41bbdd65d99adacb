// CUDA parity of the gated-delta-net kernels (hybrid Qwen3-Next / Qwen3.5 layers) against the CPU backend: the
// causal conv1d and the gated delta rule over steps that mix a fresh multi-chunk prefill, a sequence continuing from
// its state, a decode row and an idle row, then a verify-like step with state checkpoints; every output and every state
// slot is compared. Both backends run prefill steps in the chunked form and single tokens in the recurrent one, but
// not always for the same rows (the GPU picks per step, the CPU per sequence) nor in the same order of sums, and the
// two forms are equal only in exact arithmetic, hence kGdn.
#include "backend/cuda/parity_test_util.h"

namespace rs::cuda_test {
namespace {

constexpr double kGdn = 1e-4;  // chunked (CPU) vs recurrent (CUDA) forms of the delta rule over up to 130 tokens

struct StepSpec {
  struct Seq {
    int32_t slot, first_position, tokens;
  };
  std::vector<Seq> seqs;
  std::vector<int32_t> checkpoints;  // [T] or empty
};

class GdnParity : public CudaParity {
 protected:
  // Host StateBatchView of a step and the device copy of it.
  struct Views {
    StateBatchView host, device;
    int64_t tokens = 0;
  };
  Views views(const StepSpec& step) {
    std::vector<int32_t> positions, starts{0}, slots;
    for (const auto& s : step.seqs) {
      for (int32_t i = 0; i < s.tokens; ++i) positions.push_back(s.first_position + i);
      starts.push_back(starts.back() + s.tokens);
      slots.push_back(s.slot);
    }
    const auto tokens = static_cast<int64_t>(positions.size()), seqs = static_cast<int64_t>(slots.size());
    Views v;
    v.tokens = tokens;
    v.host = StateBatchView{host(positions, DType::kI32, {tokens}), host(starts, DType::kI32, {seqs + 1}),
                            host(slots, DType::kI32, {seqs}), static_cast<int32_t>(seqs),
                            step.checkpoints.empty() ? Tensor() : host(step.checkpoints, DType::kI32, {tokens})};
    v.device = StateBatchView{dev(v.host.positions), dev(v.host.seq_token_start), dev(v.host.state_slots),
                              v.host.num_seqs, dev(v.host.checkpoint_slots)};
    return v;
  }
  void check_delta_rule(const GatedDeltaNetParams& p, const std::vector<StepSpec>& steps);
};

const std::vector<StepSpec> kSteps = {
    // A fresh prefill over three chunks of 64, a sequence continuing at position 40 over two chunks, a decode row, an
    // idle row.
    {{{0, 0, 130}, {1, 40, 70}, {2, 77, 1}, {-1, 0, 1}}, {}},
    // A verify step of 5 tokens keeping the state after tokens 0, 2 and 3, beside a decode row.
    {{{0, 130, 5}, {1, 110, 1}}, {3, -1, 4, 5, -1, -1}},
    // Decode after the verify; slot 4 restarts at position 0 over a stale slot.
    {{{0, 135, 1}, {4, 0, 9}}, {}},
};

TEST_F(GdnParity, CausalConv1d) {
  constexpr int64_t kChannels = 200, kKernel = 4, kSlots = 6;
  const Tensor weight = host(normal(rng_, kChannels * kKernel, 0.5f), DType::kF32, {kChannels, kKernel});
  const Tensor weight_d = dev(weight);
  Tensor state = host(normal(rng_, kSlots * kChannels * (kKernel - 1)), DType::kF32, {kSlots, kChannels, kKernel - 1});
  Tensor state_d = dev(state);
  for (size_t i = 0; i < kSteps.size(); ++i) {
    const Views v = views(kSteps[i]);
    const Tensor x = host(normal(rng_, v.tokens * kChannels), DType::kF32, {v.tokens, kChannels});
    Tensor ref = host_zeros(DType::kF32, {v.tokens, kChannels}), out = dev(ref);
    cpu_->causal_conv1d(x, weight, state, v.host, ref);
    gpu_->causal_conv1d(dev(x), weight_d, state_d, v.device, out);
    // An idle row's output is left as it was: zero on both sides here.
    const std::vector<float> got = fetch<float>(out), want = as_floats(ref);
    EXPECT_PARITY(got, want, kElementwise, fmt::format("causal_conv1d step {}", i));
    EXPECT_PARITY(fetch<float>(state_d), as_floats(state), kElementwise, fmt::format("conv state after step {}", i));
  }
}

// Runs `steps` through both backends from the same random state and compares every output and the whole state.
void GdnParity::check_delta_rule(const GatedDeltaNetParams& p, const std::vector<StepSpec>& steps) {
  const int64_t nv = p.num_v_heads, dk = p.k_head_dim, dv = p.v_head_dim, kSlots = 6;
  const int64_t width = 2 * int64_t{p.num_k_heads} * dk + nv * dv;
  std::vector<float> a_log_values = normal(rng_, nv, 0.5f);
  for (float& a : a_log_values) a -= 2.0f;  // slow decay: the state carries across chunks
  const Tensor a_log = host(a_log_values, DType::kF32, {nv}), dt_bias = host(normal(rng_, nv, 0.3f), DType::kF32, {nv});
  const Tensor a_log_d = dev(a_log), dt_bias_d = dev(dt_bias);
  Tensor state = host(normal(rng_, kSlots * nv * dk * dv, 0.1f), DType::kF32, {kSlots, nv, dk, dv});
  Tensor state_d = dev(state);
  for (size_t i = 0; i < steps.size(); ++i) {
    const Views v = views(steps[i]);
    const Tensor qkv = host(normal(rng_, v.tokens * width), DType::kF32, {v.tokens, width});
    const Tensor ba = host(normal(rng_, v.tokens * 2 * nv), DType::kF32, {v.tokens, 2 * nv});
    Tensor ref = host_zeros(DType::kF32, {v.tokens, nv * dv}), out = dev(ref);
    cpu_->gated_delta_rule(qkv, ba, a_log, dt_bias, state, v.host, p, ref);
    gpu_->gated_delta_rule(dev(qkv), dev(ba), a_log_d, dt_bias_d, state_d, v.device, p, out);
    const std::string what = fmt::format("dk {} dv {} step {}", dk, dv, i);
    EXPECT_PARITY(fetch<float>(out), as_floats(ref), kGdn, "gated_delta_rule " + what);
    EXPECT_PARITY(fetch<float>(state_d), as_floats(state), kGdn, "delta-rule state " + what);
  }
}

// Steps with several tokens per sequence run the chunked form on both backends, decode and verify steps the recurrent
// one on the GPU.
TEST_F(GdnParity, GatedDeltaRule) {
  for (const int32_t dk : {16, 32, 64, 128}) check_delta_rule(GatedDeltaNetParams{2, 4, dk, 48}, kSteps);
}

// The released shape (dk = dv = 128: four column blocks per head) over prompts of several chunks, a decode step after.
TEST_F(GdnParity, GatedDeltaRuleLongPrompts) {
  const std::vector<StepSpec> steps = {
      {{{0, 0, 300}, {1, 0, 64}, {2, 0, 1}}, {}},
      {{{0, 300, 200}, {1, 64, 65}, {2, 1, 1}}, {}},
      {{{0, 500, 1}, {1, 129, 1}, {2, 2, 1}}, {}},
  };
  check_delta_rule(GatedDeltaNetParams{2, 4, 128, 128}, steps);
}

TEST_F(GdnParity, GatedRmsNormAndSigmoidMul) {
  constexpr int64_t kRows = 37, kWidth = 128;
  const Tensor x = host(normal(rng_, kRows * kWidth), DType::kF32, {kRows, kWidth});
  const Tensor z = host(normal(rng_, kRows * kWidth), DType::kF32, {kRows, kWidth});
  const Tensor weight = host(to_bf16(normal(rng_, kWidth)), DType::kBF16, {kWidth});
  Tensor ref = host_zeros(DType::kF32, {kRows, kWidth}), out = dev(ref);
  cpu_->gated_rms_norm(x, z, weight, 1e-6f, ref);
  gpu_->gated_rms_norm(dev(x), dev(z), dev(weight), 1e-6f, out);
  EXPECT_PARITY(fetch<float>(out), as_floats(ref), kElementwise, "gated_rms_norm");
  for (const int64_t gate_width : {kWidth, int64_t{1}}) {
    const Tensor gate = host(normal(rng_, kRows * gate_width), DType::kF32, {kRows, gate_width});
    Tensor ref2 = host_zeros(DType::kF32, {kRows, kWidth}), out2 = dev(ref2);
    cpu_->sigmoid_mul(x, gate, ref2);
    gpu_->sigmoid_mul(dev(x), dev(gate), out2);
    EXPECT_PARITY(fetch<float>(out2), as_floats(ref2), kElementwise, fmt::format("sigmoid_mul gate {}", gate_width));
  }
}

}  // namespace
}  // namespace rs::cuda_test
