// CpuBackend: the reference backend. Host memory, a thread pool over all cores, kernels in kernels/.
#pragma once

#include <memory>
#include <vector>

#include "backend/backend.h"
#include "base/thread_pool.h"

namespace rs::cpu {

class CpuBackend final : public Backend {
 public:
  // bf16_gemm: multi-token products with bf16 weights round activations to bf16 (fast, HF-bf16-like numerics);
  // false keeps every product in exact f32 (the golden tests' reference mode).
  // bf16_gemm: multi-token products with bf16 weights round activations to bf16 (the fast path); deterministic: every
  // kernel's per-row arithmetic is independent of the number of rows (BackendOptions::deterministic).
  CpuBackend(int num_threads, bool bf16_gemm, bool deterministic = false);

  Device device() const override { return Device{}; }
  std::string name() const override;
  Buffer alloc(size_t bytes) override;
  void copy(Tensor dst, const Tensor& src) override;
  void synchronize() override {}
  MemoryInfo memory_info() const override;
  Tensor upload_weight(const Tensor& host, std::vector<Buffer>& keep_alive) override { return host; }
  // In bf16-GEMM mode, repacks dense bf16 weights into VNNI panels (see kernels/gemm_bf16.h).
  void prepare_linear(LinearWeight& w, std::vector<Buffer>& keep_alive) override;

  void embedding(const Tensor& table, const Tensor& ids, Tensor out) override;
  void embedding_shard(const Tensor& table, const Tensor& ids, int64_t first_id, int64_t vocab, Tensor out) override;
  void embedding_affine_shard(const LinearWeight& table, const Tensor& ids, int64_t first_id, int64_t vocab,
                              Tensor out) override;
  void embedding_affine(const LinearWeight& table, const Tensor& ids, Tensor out) override;
  void rms_norm(const Tensor& x, const Tensor& weight, float eps, bool add_one, Tensor out) override;
  void linear(const Tensor& x, const LinearWeight& w, const Tensor& bias, Tensor out) override;
  void rope(Tensor x, const Tensor& positions, const Tensor& cos_sin, int32_t rotary_dim) override;
  void store_kv(const Tensor& k, const Tensor& v, const KvCache& cache, const BatchView& batch) override;
  void attention(const Tensor& q, const KvCache& cache, const BatchView& batch, const AttentionParams& params,
                 Tensor out) override;
  void add_rms_norm(Tensor x, const Tensor& delta, const Tensor& weight, float eps, bool add_one, Tensor out) override;
  void qkv_prepare(const Tensor& qkv, const Tensor& q_norm, const Tensor& k_norm, float eps, const Tensor& cos_sin,
                   int32_t rotary_dim, const KvCache& cache, const BatchView& batch, Tensor q_out) override;
  void add(const Tensor& a, const Tensor& b, Tensor out) override;
  void silu_mul(const Tensor& gate_up, Tensor out) override;
  void gather_rows(const Tensor& x, const Tensor& rows, Tensor out) override;
  void scatter_rows(const Tensor& x, const Tensor& rows, Tensor out, int64_t column) override;
  void moe_route(const Tensor& logits, MoeRouting routing, bool renormalize, Tensor ids, Tensor weights) override;
  void moe_experts(const Tensor& x, const Tensor& ids, const Tensor& weights, const MoeWeights& experts,
                   Tensor out) override;
  bool supports_recurrent_state() const override { return true; }
  void causal_conv1d(const Tensor& x, const Tensor& weight, Tensor conv_state, const StateBatchView& batch,
                     Tensor out) override;
  void gated_delta_rule(const Tensor& qkv, const Tensor& ba, const Tensor& a_log, const Tensor& dt_bias, Tensor state,
                        const StateBatchView& batch, const GatedDeltaNetParams& params, Tensor out) override;
  void gated_rms_norm(const Tensor& x, const Tensor& z, const Tensor& weight, float eps, Tensor out) override;
  void sigmoid_mul(const Tensor& x, const Tensor& gate, Tensor out) override;
  void sample(Tensor logits, std::span<const SampleSpec> specs, std::span<SampledToken> out) override;
  void apply_token_bitmask(Tensor logits, const Tensor& bitmask) override;

 private:
  ThreadPool pool_;
  std::vector<float> qkv_scratch_;  // k and v split out of a fused projection (qkv_prepare)
  bool bf16_gemm_;
  bool deterministic_;
  // bf16 copies of integer weights (prepare_linear): at most a quarter of the free memory at the first one.
  int64_t copy_budget_bytes_ = -1;
  int64_t copied_bytes_ = 0;
  bool copy_budget_spent_ = false;
};

}  // namespace rs::cpu
