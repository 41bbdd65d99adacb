// Gated delta net on the CPU (MODELS.md §1.6): the causal depthwise conv1d with its rolling state, and the gated delta
// rule in chunked (prefill) and recurrent (decode) form, each written after transformers' torch reference
// (torch_causal_conv1d_update, torch_chunk_gated_delta_rule, torch_recurrent_gated_delta_rule), in f32.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/kernels/kernels.h"
#include "backend/cpu/kernels/vec.h"

namespace rs::cpu {
namespace {

constexpr int64_t kChunk = 64;  // transformers' chunk_size
constexpr float kL2Eps = 1e-6f;

// The sequences of a step with a state slot: first token, token count, slot, whether it starts from zero state, and
// the slots that receive its state after each token (null: none; -1 entries: none after that token).
struct Segment {
  int64_t begin = 0, length = 0;
  int32_t slot = -1;
  bool fresh = false;
  const int32_t* checkpoints = nullptr;
};

std::vector<Segment> segments_of(const StateBatchView& batch, int64_t num_slots) {
  const int32_t* start = batch.seq_token_start.data_as<int32_t>();
  const int32_t* slots = batch.state_slots.data_as<int32_t>();
  const int32_t* positions = batch.positions.data_as<int32_t>();
  std::vector<Segment> segments;
  for (int32_t s = 0; s < batch.num_seqs; ++s) {
    if (slots[s] < 0 || start[s + 1] == start[s]) continue;  // idle padding row
    RS_CHECK(slots[s] < num_slots, "state slot {} outside a pool of {}", slots[s], num_slots);
    Segment seg{start[s], start[s + 1] - start[s], slots[s], positions[start[s]] == 0};
    if (!batch.checkpoint_slots.empty()) {
      const int32_t* cp = batch.checkpoint_slots.data_as<int32_t>() + seg.begin;
      for (int64_t t = 0; t < seg.length; ++t) {
        RS_CHECK(cp[t] < num_slots && cp[t] != seg.slot, "checkpoint slot {} of a sequence in slot {} (pool of {})",
                 cp[t], seg.slot, num_slots);
        if (cp[t] >= 0) seg.checkpoints = cp;
      }
    }
    segments.push_back(seg);
  }
  return segments;
}

float dot(const float* a, const float* b, int64_t n) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }  // torch's threshold 20

// One value head's inputs for one segment, gathered contiguously: q, k [n, dk] (normalised, q scaled), v [n, dv],
// beta and g [n].
struct HeadInputs {
  std::vector<float> q, k, v, beta, g;
};

void gather_head(const Tensor& qkv, const Tensor& ba, const float* a_log, const float* dt_bias,
                 const GatedDeltaNetParams& p, const Segment& seg, int32_t head, HeadInputs& in) {
  const int64_t dk = p.k_head_dim, dv = p.v_head_dim, n = seg.length;
  const int64_t key_dim = static_cast<int64_t>(p.num_k_heads) * dk, width = 2 * key_dim + p.num_v_heads * dv;
  const int32_t k_head = head / (p.num_v_heads / p.num_k_heads);
  const float q_scale = 1.0f / std::sqrt(static_cast<float>(dk));
  const float decay_rate = -std::exp(a_log[head]);
  in.q.resize(n * dk), in.k.resize(n * dk), in.v.resize(n * dv), in.beta.resize(n), in.g.resize(n);
  for (int64_t t = 0; t < n; ++t) {
    const float* row = qkv.data_as<float>() + (seg.begin + t) * width;
    const float* q = row + k_head * dk;
    const float* k = row + key_dim + k_head * dk;
    const float* v = row + 2 * key_dim + head * dv;
    const float q_inv = 1.0f / std::sqrt(dot(q, q, dk) + kL2Eps), k_inv = 1.0f / std::sqrt(dot(k, k, dk) + kL2Eps);
    for (int64_t i = 0; i < dk; ++i) {
      in.q[t * dk + i] = q[i] * q_inv * q_scale;
      in.k[t * dk + i] = k[i] * k_inv;
    }
    std::copy(v, v + dv, in.v.begin() + t * dv);
    const float* b_a = ba.data_as<float>() + (seg.begin + t) * 2 * p.num_v_heads;
    in.beta[t] = 1.0f / (1.0f + std::exp(-b_a[head]));
    in.g[t] = decay_rate * softplus(b_a[p.num_v_heads + head] + dt_bias[head]);
  }
}

// Token by token (torch_recurrent_gated_delta_rule): S = exp(g) S; u = S^T k; S += k ((v - u) beta)^T; o = S^T q.
// after_token[t], when given and not null, receives a copy of the state after token t.
void recurrent_head(const HeadInputs& in, int64_t n, int64_t dk, int64_t dv, float* state, float* out,
                    int64_t out_stride, const std::vector<float*>* after_token = nullptr) {
  std::vector<float> kv_mem(dv);
  for (int64_t t = 0; t < n; ++t) {
    const float decay = std::exp(in.g[t]);
    for (int64_t i = 0; i < dk * dv; ++i) state[i] *= decay;
    const float* k = &in.k[t * dk];
    const float* q = &in.q[t * dk];
    std::fill(kv_mem.begin(), kv_mem.end(), 0.0f);
    for (int64_t i = 0; i < dk; ++i)
      for (int64_t j = 0; j < dv; ++j) kv_mem[j] += state[i * dv + j] * k[i];
    for (int64_t j = 0; j < dv; ++j) kv_mem[j] = (in.v[t * dv + j] - kv_mem[j]) * in.beta[t];  // delta
    for (int64_t i = 0; i < dk; ++i)
      for (int64_t j = 0; j < dv; ++j) state[i * dv + j] += k[i] * kv_mem[j];
    float* o = out + t * out_stride;
    std::fill(o, o + dv, 0.0f);
    for (int64_t i = 0; i < dk; ++i)
      for (int64_t j = 0; j < dv; ++j) o[j] += state[i * dv + j] * q[i];
    if (after_token && (*after_token)[t]) std::copy(state, state + dk * dv, (*after_token)[t]);
  }
}

// Chunks of 64 tokens (torch_chunk_gated_delta_rule; a short last chunk equals the reference's zero padding).
void chunked_head(const HeadInputs& in, int64_t n, int64_t dk, int64_t dv, float* state, float* out,
                  int64_t out_stride) {
  std::vector<float> cum(kChunk), ut(kChunk * kChunk), attn(kChunk * kChunk);
  std::vector<float> new_values(kChunk * dv), k_cumdecay(kChunk * dk), v_new(kChunk * dv);
  for (int64_t c0 = 0; c0 < n; c0 += kChunk) {
    const int64_t len = std::min(kChunk, n - c0);
    const float* q = &in.q[c0 * dk];
    const float* k = &in.k[c0 * dk];
    const float* v = &in.v[c0 * dv];
    const float* beta = &in.beta[c0];
    float running = 0.0f;
    for (int64_t i = 0; i < len; ++i) cum[i] = running += in.g[c0 + i];
    // ut[i][j] = beta_i (k_i . k_j) exp(cum_i - cum_j) and attn[i][j] = (q_i . k_j) exp(cum_i - cum_j), j <= i.
    for (int64_t i = 0; i < len; ++i)
      for (int64_t j = 0; j <= i; ++j) {
        const float decay = std::exp(cum[i] - cum[j]);
        ut[i * kChunk + j] = beta[i] * dot(&k[i * dk], &k[j * dk], dk) * decay;
        attn[i * kChunk + j] = dot(&q[i * dk], &k[j * dk], dk) * decay;
      }
    // Solve (I + strictly_lower(ut)) X = B by forward substitution for B = v beta and B = k beta exp(cum).
    for (int64_t i = 0; i < len; ++i) {
      float* nv = &new_values[i * dv];
      float* kc = &k_cumdecay[i * dk];
      const float cum_decay = std::exp(cum[i]);
      for (int64_t j = 0; j < dv; ++j) nv[j] = v[i * dv + j] * beta[i];
      for (int64_t j = 0; j < dk; ++j) kc[j] = k[i * dk + j] * beta[i] * cum_decay;
      for (int64_t m = 0; m < i; ++m) {
        const float l = ut[i * kChunk + m];
        for (int64_t j = 0; j < dv; ++j) nv[j] -= l * new_values[m * dv + j];
        for (int64_t j = 0; j < dk; ++j) kc[j] -= l * k_cumdecay[m * dk + j];
      }
    }
    // v_new = new_values - k_cumdecay S; out = (q exp(cum)) S + attn v_new.
    for (int64_t i = 0; i < len; ++i) {
      float* vn = &v_new[i * dv];
      float* o = out + (c0 + i) * out_stride;
      std::copy(&new_values[i * dv], &new_values[i * dv] + dv, vn);
      std::fill(o, o + dv, 0.0f);
      const float q_decay = std::exp(cum[i]);
      for (int64_t r = 0; r < dk; ++r) {
        const float kc = k_cumdecay[i * dk + r], qr = q[i * dk + r] * q_decay;
        const float* s = state + r * dv;
        for (int64_t j = 0; j < dv; ++j) {
          vn[j] -= kc * s[j];
          o[j] += qr * s[j];
        }
      }
    }
    for (int64_t i = 0; i < len; ++i) {
      float* o = out + (c0 + i) * out_stride;
      for (int64_t m = 0; m <= i; ++m) {
        const float a = attn[i * kChunk + m];
        for (int64_t j = 0; j < dv; ++j) o[j] += a * v_new[m * dv + j];
      }
    }
    // S = S exp(cum_last) + sum_i (k_i exp(cum_last - cum_i)) v_new_i^T.
    const float chunk_decay = std::exp(cum[len - 1]);
    for (int64_t i = 0; i < dk * dv; ++i) state[i] *= chunk_decay;
    for (int64_t m = 0; m < len; ++m) {
      const float key_decay = std::exp(cum[len - 1] - cum[m]);
      for (int64_t r = 0; r < dk; ++r) {
        const float kr = k[m * dk + r] * key_decay;
        float* s = state + r * dv;
        for (int64_t j = 0; j < dv; ++j) s[j] += kr * v_new[m * dv + j];
      }
    }
  }
}

}  // namespace

void causal_conv1d(ThreadPool& pool, const Tensor& x, const Tensor& weight, Tensor conv_state,
                   const StateBatchView& batch, Tensor out) {
  const int64_t channels = x.dim(-1), kernel = weight.dim(-1), history = kernel - 1;
  RS_CHECK(weight.dtype() == DType::kF32 && weight.numel() == channels * kernel && conv_state.dim(1) == channels &&
               conv_state.dim(2) == history && out.numel() == x.numel(),
           "causal_conv1d: x {}, weight {}, state {}", x.shape_string(), weight.shape_string(),
           conv_state.shape_string());
  const std::vector<Segment> segments = segments_of(batch, conv_state.dim(0));
  const float* w = weight.data_as<float>();
  pool.parallel_for(channels, [&](int64_t c_begin, int64_t c_end) {
    std::vector<float> window;
    for (const Segment& seg : segments) {
      float* state = conv_state.data_as<float>() + (static_cast<int64_t>(seg.slot) * channels) * history;
      for (int64_t c = c_begin; c < c_end; ++c) {
        // window = the channel's last K-1 inputs, then this segment's inputs.
        window.assign(history + seg.length, 0.0f);
        if (!seg.fresh) std::copy(state + c * history, state + (c + 1) * history, window.begin());
        for (int64_t t = 0; t < seg.length; ++t)
          window[history + t] = x.data_as<float>()[(seg.begin + t) * channels + c];
        for (int64_t t = 0; t < seg.length; ++t) {
          float sum = 0.0f;
          for (int64_t j = 0; j < kernel; ++j) sum += w[c * kernel + j] * window[t + j];
          out.data_as<float>()[(seg.begin + t) * channels + c] = sum / (1.0f + std::exp(-sum));
        }
        std::copy(window.end() - history, window.end(), state + c * history);
        for (int64_t t = 0; seg.checkpoints && t < seg.length; ++t) {  // the K-1 inputs up to token t
          if (seg.checkpoints[t] < 0) continue;
          float* kept = conv_state.data_as<float>() + static_cast<int64_t>(seg.checkpoints[t]) * channels * history;
          std::copy(window.begin() + t + 1, window.begin() + t + 1 + history, kept + c * history);
        }
      }
    }
  });
}

void gated_delta_rule(ThreadPool& pool, const Tensor& qkv, const Tensor& ba, const Tensor& a_log, const Tensor& dt_bias,
                      Tensor state, const StateBatchView& batch, const GatedDeltaNetParams& params, Tensor out,
                      bool row_invariant) {
  const int64_t nv = params.num_v_heads, dk = params.k_head_dim, dv = params.v_head_dim;
  RS_CHECK(params.num_k_heads > 0 && nv % params.num_k_heads == 0, "gated_delta_rule: {} value heads for {} key heads",
           nv, params.num_k_heads);
  RS_CHECK(qkv.dim(-1) == 2 * params.num_k_heads * dk + nv * dv && ba.dim(-1) == 2 * nv && out.dim(-1) == nv * dv &&
               state.dim(1) == nv && state.dim(2) == dk && state.dim(3) == dv && a_log.dtype() == DType::kF32 &&
               dt_bias.dtype() == DType::kF32,
           "gated_delta_rule: qkv {}, ba {}, state {}, out {}", qkv.shape_string(), ba.shape_string(),
           state.shape_string(), out.shape_string());
  const std::vector<Segment> segments = segments_of(batch, state.dim(0));
  const int64_t items = static_cast<int64_t>(segments.size()) * nv;
  pool.parallel_for(items, [&](int64_t begin, int64_t end) {
    HeadInputs in;
    std::vector<float*> after_token;
    for (int64_t item = begin; item < end; ++item) {
      const Segment& seg = segments[item / nv];
      const int32_t head = static_cast<int32_t>(item % nv);
      float* s = state.data_as<float>() + ((static_cast<int64_t>(seg.slot) * nv + head) * dk) * dv;
      if (seg.fresh) std::fill(s, s + dk * dv, 0.0f);
      gather_head(qkv, ba, a_log.data_as<float>(), dt_bias.data_as<float>(), params, seg, head, in);
      float* o = out.data_as<float>() + seg.begin * nv * dv + head * dv;
      if (seg.checkpoints) {
        after_token.assign(seg.length, nullptr);
        for (int64_t t = 0; t < seg.length; ++t)
          if (seg.checkpoints[t] >= 0)
            after_token[t] =
                state.data_as<float>() + ((static_cast<int64_t>(seg.checkpoints[t]) * nv + head) * dk) * dv;
        recurrent_head(in, seg.length, dk, dv, s, o, nv * dv, &after_token);
      } else if (seg.length == 1 || row_invariant) {
        recurrent_head(in, seg.length, dk, dv, s, o, nv * dv);
      } else {
        chunked_head(in, seg.length, dk, dv, s, o, nv * dv);
      }
    }
  });
}

}  // namespace rs::cpu
