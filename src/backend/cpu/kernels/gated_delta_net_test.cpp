// The gated-delta-net kernels against a naive per-token reference written from MODELS.md §1.6: the chunked form
// (prefill) and the recurrent form (decode) give the same outputs and states, however a sequence is split into steps,
// next to other sequences and idle rows, and a sequence at position 0 starts from zero state.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "backend/backend.h"

namespace rs {
namespace {

constexpr int kKeyHeads = 2, kValueHeads = 4, kKeyDim = 8, kValueDim = 6, kKernel = 4;
constexpr int kKeyWidth = kKeyHeads * kKeyDim, kChannels = 2 * kKeyWidth + kValueHeads * kValueDim;
const GatedDeltaNetParams kParams{kKeyHeads, kValueHeads, kKeyDim, kValueDim};

std::vector<float> random_vector(size_t n, float scale, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = normal(rng);
  return v;
}

// Inputs of one sequence of `tokens` tokens, and the reference outputs/state computed token by token in double.
struct Sequence {
  int tokens = 0;
  std::vector<float> qkv, ba, a_log, dt_bias;  // [T, C], [T, 2 nv], [nv], [nv]
  std::vector<double> out, state;              // [T, nv dv], [nv, dk, dv]

  Sequence(int num_tokens, uint32_t seed) : tokens(num_tokens) {
    qkv = random_vector(static_cast<size_t>(tokens) * kChannels, 1.0f, seed);
    ba = random_vector(static_cast<size_t>(tokens) * 2 * kValueHeads, 1.0f, seed + 1);
    a_log = random_vector(kValueHeads, 0.5f, 1000);  // layer parameters: the same for every sequence
    for (auto& x : a_log) x -= 2.0f;                 // slow decay: the state carries information across chunks
    dt_bias = random_vector(kValueHeads, 0.3f, 1001);
    reference();
  }

  void reference() {
    out.assign(static_cast<size_t>(tokens) * kValueHeads * kValueDim, 0.0);
    state.assign(static_cast<size_t>(kValueHeads) * kKeyDim * kValueDim, 0.0);
    for (int t = 0; t < tokens; ++t) {
      const float* row = &qkv[static_cast<size_t>(t) * kChannels];
      for (int h = 0; h < kValueHeads; ++h) {
        const int kh = h / (kValueHeads / kKeyHeads);
        std::vector<double> q(kKeyDim), k(kKeyDim);
        double qq = 0, kk = 0;
        for (int i = 0; i < kKeyDim; ++i) {
          q[i] = row[kh * kKeyDim + i], k[i] = row[kKeyWidth + kh * kKeyDim + i];
          qq += q[i] * q[i], kk += k[i] * k[i];
        }
        for (int i = 0; i < kKeyDim; ++i) {
          q[i] = q[i] / std::sqrt(qq + 1e-6) / std::sqrt(double(kKeyDim));
          k[i] = k[i] / std::sqrt(kk + 1e-6);
        }
        const double beta = 1.0 / (1.0 + std::exp(-ba[t * 2 * kValueHeads + h]));
        const double a = ba[t * 2 * kValueHeads + kValueHeads + h] + dt_bias[h];
        const double g = -std::exp(double(a_log[h])) * std::log1p(std::exp(a));
        double* s = &state[static_cast<size_t>(h) * kKeyDim * kValueDim];
        for (int i = 0; i < kKeyDim * kValueDim; ++i) s[i] *= std::exp(g);
        for (int j = 0; j < kValueDim; ++j) {
          double u = 0;
          for (int i = 0; i < kKeyDim; ++i) u += s[i * kValueDim + j] * k[i];
          const double delta = (row[2 * kKeyWidth + h * kValueDim + j] - u) * beta;
          for (int i = 0; i < kKeyDim; ++i) s[i * kValueDim + j] += k[i] * delta;
        }
        for (int j = 0; j < kValueDim; ++j) {
          double o = 0;
          for (int i = 0; i < kKeyDim; ++i) o += s[i * kValueDim + j] * q[i];
          out[(static_cast<size_t>(t) * kValueHeads + h) * kValueDim + j] = o;
        }
      }
    }
  }
};

// Host metadata of one step: sequences as (slot, first position, token count).
struct Step {
  std::vector<int32_t> positions, starts{0}, slots;
  std::vector<int32_t> checkpoints;  // [T] when set: slots receiving the state after each token
  void add(int32_t slot, int32_t first_position, int32_t count) {
    for (int32_t i = 0; i < count; ++i) positions.push_back(first_position + i);
    starts.push_back(starts.back() + count);
    slots.push_back(slot);
  }
  StateBatchView view() {
    const int64_t tokens = static_cast<int64_t>(positions.size()), seqs = static_cast<int64_t>(slots.size());
    return StateBatchView{Tensor(positions.data(), DType::kI32, {tokens}),
                          Tensor(starts.data(), DType::kI32, {seqs + 1}), Tensor(slots.data(), DType::kI32, {seqs}),
                          static_cast<int32_t>(seqs),
                          checkpoints.empty() ? Tensor() : Tensor(checkpoints.data(), DType::kI32, {tokens})};
  }
};

class GatedDeltaRuleTest : public ::testing::Test {
 protected:
  static constexpr int kSlots = 3;
  std::unique_ptr<Backend> backend = make_backend("cpu");
  std::vector<float> state = std::vector<float>(size_t(kSlots) * kValueHeads * kKeyDim * kValueDim, 0.0f);
  Tensor state_tensor{state.data(), DType::kF32, {kSlots, kValueHeads, kKeyDim, kValueDim}};

  // Runs tokens [begin, begin + count) of each (sequence, slot) in one step; returns the outputs [T, nv dv].
  std::vector<float> run(const std::vector<const Sequence*>& seqs, const std::vector<int32_t>& slots,
                         const std::vector<int>& begins, const std::vector<int>& counts,
                         std::vector<int32_t> checkpoints = {}) {
    Step step;
    step.checkpoints = std::move(checkpoints);
    std::vector<float> qkv, ba;
    for (size_t s = 0; s < seqs.size(); ++s) {
      step.add(slots[s], begins[s], counts[s]);
      const Sequence& seq = *seqs[s];
      qkv.insert(qkv.end(), seq.qkv.begin() + size_t(begins[s]) * kChannels,
                 seq.qkv.begin() + size_t(begins[s] + counts[s]) * kChannels);
      ba.insert(ba.end(), seq.ba.begin() + size_t(begins[s]) * 2 * kValueHeads,
                seq.ba.begin() + size_t(begins[s] + counts[s]) * 2 * kValueHeads);
    }
    const int64_t tokens = static_cast<int64_t>(step.positions.size());
    std::vector<float> out(size_t(tokens) * kValueHeads * kValueDim, -7.0f);
    const Sequence& first = *seqs[0];  // every sequence of a test shares a_log and dt_bias (same layer)
    backend->gated_delta_rule(
        Tensor(qkv.data(), DType::kF32, {tokens, kChannels}), Tensor(ba.data(), DType::kF32, {tokens, 2 * kValueHeads}),
        Tensor(const_cast<float*>(first.a_log.data()), DType::kF32, {kValueHeads}),
        Tensor(const_cast<float*>(first.dt_bias.data()), DType::kF32, {kValueHeads}), state_tensor, step.view(),
        kParams, Tensor(out.data(), DType::kF32, {tokens, kValueHeads * kValueDim}));
    return out;
  }

  // Runs `seq` in steps of the given sizes on `slot` and compares every output and the final state.
  void expect_split_matches(const Sequence& seq, int32_t slot, const std::vector<int>& sizes) {
    int begin = 0;
    for (int size : sizes) {
      const std::vector<float> out = run({&seq}, {slot}, {begin}, {size});
      for (size_t i = 0; i < out.size(); ++i)
        ASSERT_NEAR(out[i], seq.out[size_t(begin) * kValueHeads * kValueDim + i], 2e-4)
            << "token " << begin + i / (kValueHeads * kValueDim) << " of a step of " << size;
      begin += size;
    }
    ASSERT_EQ(begin, seq.tokens);
    const float* s = &state[size_t(slot) * kValueHeads * kKeyDim * kValueDim];
    for (size_t i = 0; i < seq.state.size(); ++i) ASSERT_NEAR(s[i], seq.state[i], 2e-4) << "state " << i;
  }
};

TEST_F(GatedDeltaRuleTest, WholePrefillOverSeveralChunksMatchesTokenByTokenReference) {
  const Sequence seq(150, 11);  // chunks of 64, 64 and 22
  expect_split_matches(seq, 1, {150});
}

TEST_F(GatedDeltaRuleTest, ChunkedPrefillAcrossStepsAndDecodeCarryTheState) {
  const Sequence seq(150, 12);
  expect_split_matches(seq, 0, {1, 70, 5, 1, 64, 1, 1, 7});
}

TEST_F(GatedDeltaRuleTest, TokenByTokenDecodeMatches) {
  const Sequence seq(80, 13);
  expect_split_matches(seq, 2, std::vector<int>(80, 1));
}

TEST_F(GatedDeltaRuleTest, TheStateMattersAndPositionZeroResetsIt) {
  const Sequence seq(40, 14);
  expect_split_matches(seq, 1, {40});
  // The same tokens again at position 0 start over: a stale slot must not leak into them.
  expect_split_matches(seq, 1, {25, 15});
  // The test data exercises the state: the last 15 tokens run from zero state come out clearly different.
  Sequence tail = seq;
  tail.tokens = 15;
  tail.qkv.erase(tail.qkv.begin(), tail.qkv.begin() + size_t(25) * kChannels);
  tail.ba.erase(tail.ba.begin(), tail.ba.begin() + size_t(25) * 2 * kValueHeads);
  tail.reference();
  double max_diff = 0;
  for (size_t i = 0; i < tail.out.size(); ++i)
    max_diff = std::max(max_diff, std::abs(tail.out[i] - seq.out[size_t(25) * kValueHeads * kValueDim + i]));
  EXPECT_GT(max_diff, 1e-2);
}

TEST_F(GatedDeltaRuleTest, SequencesOfOneStepStayApartAndIdleRowsAreSkipped) {
  const Sequence a(90, 21), b(30, 22);
  std::fill(state.begin(), state.end(), 3.0f);  // stale contents everywhere
  // Step 1: a's first 70 tokens on slot 2, b's first 20 on slot 0.
  std::vector<const Sequence*> seqs{&a, &b};
  const std::vector<float> first = run(seqs, {2, 0}, {0, 0}, {70, 20});
  for (int t = 0; t < 70; ++t)
    for (int i = 0; i < kValueHeads * kValueDim; ++i)
      ASSERT_NEAR(first[t * kValueHeads * kValueDim + i], a.out[t * kValueHeads * kValueDim + i], 2e-4);
  // Step 2: b's last 10 next to a's next 20 (now in the other order).
  const std::vector<float> second = run({&b, &a}, {0, 2}, {20, 70}, {10, 20});
  for (int t = 0; t < 10; ++t)
    for (int i = 0; i < kValueHeads * kValueDim; ++i)
      ASSERT_NEAR(second[t * kValueHeads * kValueDim + i], b.out[(20 + t) * kValueHeads * kValueDim + i], 2e-4);
  for (int t = 0; t < 20; ++t)
    for (int i = 0; i < kValueHeads * kValueDim; ++i)
      ASSERT_NEAR(second[(10 + t) * kValueHeads * kValueDim + i], a.out[(70 + t) * kValueHeads * kValueDim + i], 2e-4);
  // An idle row (slot -1) reads and writes nothing: slot 1 keeps its stale contents.
  Step idle;
  idle.add(-1, 0, 1);
  std::vector<float> qkv(kChannels, 1.0f), ba(2 * kValueHeads, 0.0f), out(kValueHeads * kValueDim, -7.0f);
  backend->gated_delta_rule(Tensor(qkv.data(), DType::kF32, {1, kChannels}),
                            Tensor(ba.data(), DType::kF32, {1, 2 * kValueHeads}),
                            Tensor(const_cast<float*>(a.a_log.data()), DType::kF32, {kValueHeads}),
                            Tensor(const_cast<float*>(a.dt_bias.data()), DType::kF32, {kValueHeads}), state_tensor,
                            idle.view(), kParams, Tensor(out.data(), DType::kF32, {1, kValueHeads * kValueDim}));
  EXPECT_EQ(out[0], -7.0f);
  EXPECT_EQ(state[size_t(1) * kValueHeads * kKeyDim * kValueDim], 3.0f);
}

// Speculative verification: a step of several tokens with checkpoints runs token by token and leaves in each
// checkpoint slot exactly the state that decode steps up to that token leave (bit for bit: rollback must not change
// what plain decoding computes), while the sequence's own slot advances over all of them.
TEST_F(GatedDeltaRuleTest, CheckpointsHoldTheStateAfterEachToken) {
  const Sequence seq(30, 15);
  const size_t slot_floats = size_t(kValueHeads) * kKeyDim * kValueDim;
  for (int kept = 0; kept < 5; ++kept) {
    run({&seq}, {0}, {0}, {25});  // slot 0: the prompt
    std::vector<int32_t> checkpoints(5, -1);
    checkpoints[kept] = 2;
    const std::vector<float> verify = run({&seq}, {0}, {25}, {5}, checkpoints);
    const std::vector<float> after_all(state.begin(), state.begin() + slot_floats);
    const std::vector<float> kept_state(state.begin() + 2 * slot_floats, state.begin() + 3 * slot_floats);
    // Reference: the prompt again on slot 1, then one decode step per token.
    run({&seq}, {1}, {0}, {25});
    for (int t = 0; t < 5; ++t) {
      const std::vector<float> decode = run({&seq}, {1}, {25 + t}, {1});
      for (int i = 0; i < kValueHeads * kValueDim; ++i)
        ASSERT_EQ(verify[t * kValueHeads * kValueDim + i], decode[i]) << "token " << t;
      if (t == kept) {
        ASSERT_TRUE(std::equal(kept_state.begin(), kept_state.end(), state.begin() + slot_floats)) << "after " << t;
      }
    }
    ASSERT_TRUE(std::equal(after_all.begin(), after_all.end(), state.begin() + slot_floats));
  }
}

// Conv: y_t[c] = silu(sum_j w[c][j] x_{t-K+1+j}[c]) with zero history at position 0 (transformers' causal_conv1d_fn /
// causal_conv1d_update), however the tokens are split into steps.
TEST(CausalConv1d, RollingStateMatchesTheWholeSequence) {
  auto backend = make_backend("cpu");
  constexpr int kTokens = 23, kConvChannels = 5;
  const std::vector<float> x = random_vector(kTokens * kConvChannels, 1.0f, 31);
  const std::vector<float> weight = random_vector(kConvChannels * kKernel, 0.5f, 32);
  std::vector<double> expected(kTokens * kConvChannels);
  for (int t = 0; t < kTokens; ++t)
    for (int c = 0; c < kConvChannels; ++c) {
      double sum = 0;
      for (int j = 0; j < kKernel; ++j) {
        const int src = t - kKernel + 1 + j;
        if (src >= 0) sum += weight[c * kKernel + j] * x[src * kConvChannels + c];
      }
      expected[t * kConvChannels + c] = sum / (1.0 + std::exp(-sum));
    }
  for (const std::vector<int>& sizes : {std::vector<int>{23}, {1, 1, 2, 9, 1, 9}, {3, 20}}) {
    std::vector<float> conv_state(2 * kConvChannels * (kKernel - 1), 5.0f);  // stale: position 0 must ignore it
    int begin = 0;
    for (int size : sizes) {
      Step step;
      step.add(1, begin, size);
      std::vector<float> out(size * kConvChannels);
      backend->causal_conv1d(
          Tensor(const_cast<float*>(x.data()) + begin * kConvChannels, DType::kF32, {size, kConvChannels}),
          Tensor(const_cast<float*>(weight.data()), DType::kF32, {kConvChannels, kKernel}),
          Tensor(conv_state.data(), DType::kF32, {2, kConvChannels, kKernel - 1}), step.view(),
          Tensor(out.data(), DType::kF32, {size, kConvChannels}));
      for (int i = 0; i < size * kConvChannels; ++i)
        ASSERT_NEAR(out[i], expected[begin * kConvChannels + i], 1e-5) << "step of " << size << " at " << begin;
      begin += size;
    }
    EXPECT_EQ(conv_state[0], 5.0f);  // slot 0 untouched
    // Slot 1 holds the last K-1 inputs, oldest first.
    for (int c = 0; c < kConvChannels; ++c)
      for (int j = 0; j < kKernel - 1; ++j)
        EXPECT_EQ(conv_state[(kConvChannels + c) * (kKernel - 1) + j],
                  x[(kTokens - kKernel + 1 + j) * kConvChannels + c]);
  }
}

// Checkpoints of the conv state: after token t a slot holds the K-1 inputs up to t, as a step ending there leaves.
TEST(CausalConv1d, CheckpointsHoldTheInputsUpToEachToken) {
  auto backend = make_backend("cpu");
  constexpr int kTokens = 9, kConvChannels = 3, kHistory = kKernel - 1;
  const std::vector<float> x = random_vector(kTokens * kConvChannels, 1.0f, 41);
  const std::vector<float> weight = random_vector(kConvChannels * kKernel, 0.5f, 42);
  std::vector<float> conv_state(4 * kConvChannels * kHistory, 0.0f);
  const auto conv = [&](int begin, int size, int32_t slot, std::vector<int32_t> checkpoints) {
    Step step;
    step.add(slot, begin, size);
    step.checkpoints = std::move(checkpoints);
    std::vector<float> out(size * kConvChannels);
    backend->causal_conv1d(
        Tensor(const_cast<float*>(x.data()) + begin * kConvChannels, DType::kF32, {size, kConvChannels}),
        Tensor(const_cast<float*>(weight.data()), DType::kF32, {kConvChannels, kKernel}),
        Tensor(conv_state.data(), DType::kF32, {4, kConvChannels, kHistory}), step.view(),
        Tensor(out.data(), DType::kF32, {size, kConvChannels}));
  };
  conv(0, 4, 0, {});
  conv(4, 5, 0, {1, -1, 2, 3, -1});  // after tokens 4, 6 and 7 into slots 1, 2, 3
  const auto slot = [&](int s) {
    return std::vector<float>(conv_state.begin() + s * kConvChannels * kHistory,
                              conv_state.begin() + (s + 1) * kConvChannels * kHistory);
  };
  for (const auto& [s, last] : {std::pair{1, 4}, {2, 6}, {3, 7}})
    for (int c = 0; c < kConvChannels; ++c)
      for (int j = 0; j < kHistory; ++j)
        EXPECT_EQ(slot(s)[c * kHistory + j], x[(last - kHistory + 1 + j) * kConvChannels + c]) << s;
  for (int c = 0; c < kConvChannels; ++c)
    for (int j = 0; j < kHistory; ++j)
      EXPECT_EQ(slot(0)[c * kHistory + j], x[(kTokens - kHistory + j) * kConvChannels + c]);
}

TEST(GatedRmsNorm, NormalisesThenGatesWithSilu) {
  auto backend = make_backend("cpu");
  std::vector<float> x = {1, -2, 3, 0.5f, 4, 0, -1, 2}, z = {0.3f, -1, 2, 0, 1, 1, -3, 0.5f}, w = {1, 0.5f, 2, -1};
  std::vector<float> out(8);
  backend->gated_rms_norm(Tensor(x.data(), DType::kF32, {2, 4}), Tensor(z.data(), DType::kF32, {2, 4}),
                          Tensor(w.data(), DType::kF32, {4}), 1e-6f, Tensor(out.data(), DType::kF32, {2, 4}));
  for (int r = 0; r < 2; ++r) {
    double ms = 0;
    for (int i = 0; i < 4; ++i) ms += x[r * 4 + i] * x[r * 4 + i] / 4.0;
    for (int i = 0; i < 4; ++i) {
      const double g = z[r * 4 + i];
      EXPECT_NEAR(out[r * 4 + i], x[r * 4 + i] / std::sqrt(ms + 1e-6) * w[i] * g / (1 + std::exp(-g)), 1e-5);
    }
  }
}

TEST(SigmoidMul, PerElementOrOnePerRow) {
  auto backend = make_backend("cpu");
  std::vector<float> x = {1, 2, 3, 4}, gate = {0, 1, -1, 2}, row_gate = {0, 2}, out(4);
  backend->sigmoid_mul(Tensor(x.data(), DType::kF32, {2, 2}), Tensor(gate.data(), DType::kF32, {2, 2}),
                       Tensor(out.data(), DType::kF32, {2, 2}));
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(out[i], x[i] / (1 + std::exp(-gate[i])), 1e-6);
  backend->sigmoid_mul(Tensor(x.data(), DType::kF32, {2, 2}), Tensor(row_gate.data(), DType::kF32, {2, 1}),
                       Tensor(out.data(), DType::kF32, {2, 2}));
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(out[i], x[i] / (1 + std::exp(-row_gate[i / 2])), 1e-6);
}

}  // namespace
}  // namespace rs
