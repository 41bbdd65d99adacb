// CPU kernels: the reference implementation of every Backend op (f32 activations; f32/bf16/MXFP4 weights).
#pragma once

#include "backend/backend.h"
#include "base/thread_pool.h"

namespace rs::cpu {

// Rows of `table` for `ids`. A vocabulary shard (tensor parallelism): `table` holds rows [first_id, first_id + rows)
// of a `vocab`-row table and other ids give zero rows; vocab < 0: the table is whole.
void embedding(ThreadPool& pool, const Tensor& table, const Tensor& ids, Tensor out, int64_t first_id = 0,
               int64_t vocab = -1);
void rms_norm(ThreadPool& pool, const Tensor& x, const Tensor& weight, float eps, bool add_one, Tensor out);
void add(ThreadPool& pool, const Tensor& a, const Tensor& b, Tensor out);
void silu_mul(ThreadPool& pool, const Tensor& gate_up, Tensor out);
void gather_rows(const Tensor& x, const Tensor& rows, Tensor out);
void scatter_rows(const Tensor& x, const Tensor& rows, Tensor out, int64_t column);
void gated_rms_norm(ThreadPool& pool, const Tensor& x, const Tensor& z, const Tensor& weight, float eps, Tensor out);
void sigmoid_mul(ThreadPool& pool, const Tensor& x, const Tensor& gate, Tensor out);

// Gated delta net (gated_delta_net.cpp), as Backend::causal_conv1d and Backend::gated_delta_rule.
void causal_conv1d(ThreadPool& pool, const Tensor& x, const Tensor& weight, Tensor conv_state,
                   const StateBatchView& batch, Tensor out);
// row_invariant: the recurrent form for every segment (the chunked form's arithmetic depends on how a prompt is split
// into steps).
void gated_delta_rule(ThreadPool& pool, const Tensor& qkv, const Tensor& ba, const Tensor& a_log, const Tensor& dt_bias,
                      Tensor state, const StateBatchView& batch, const GatedDeltaNetParams& params, Tensor out,
                      bool row_invariant = false);

// Backend::apply_token_bitmask on host memory: logits [R, vocab] f32, bitmask [R, ceil(vocab / 32)] 32-bit words.
void apply_token_bitmask(Tensor logits, const Tensor& bitmask);

// out [T, out] = x [T, in] . W^T (+ bias); W dense f32/bf16/f16 or MXFP4. With bf16_activations, multi-token
// products with bf16 weights round x to bf16 and use the AVX512-BF16 kernel (f32 accumulation); otherwise exact f32.
// row_invariant: one kernel for every token count, so each row's result is the same whatever T is (deterministic
// inference); with bf16_activations that is the bf16 kernel even for one token.
void linear(ThreadPool& pool, const Tensor& x, const LinearWeight& w, const Tensor& bias, Tensor out,
            bool bf16_activations = false, bool row_invariant = false);
// Single-threaded variant over output rows [row_begin, row_end) (used inside already-parallel loops).
// Row `row` of an FP8 weight [out, in] exactly dequantized into f32 (each code's value times its block's scale).
void decode_fp8_row(const LinearWeight& w, int64_t row, float* out);
// Row `row` of an integer weight (LinearWeight::kAffine), exactly dequantized to f32.
void decode_affine_row(const LinearWeight& w, int64_t row, float* out);
void linear_rows(const float* x, int64_t num_tokens, const LinearWeight& w, const float* bias, float* out,
                 int64_t out_stride, int64_t row_begin, int64_t row_end, bool row_invariant = false);

void rope(ThreadPool& pool, Tensor x, const Tensor& positions, const Tensor& cos_sin, int32_t rotary_dim);
void store_kv(const Tensor& k, const Tensor& v, const KvCache& cache, const BatchView& batch);
void attention(ThreadPool& pool, const Tensor& q, const KvCache& cache, const BatchView& batch,
               const AttentionParams& params, Tensor out);

void moe_route(const Tensor& logits, MoeRouting routing, bool renormalize, Tensor ids, Tensor weights);
void moe_experts(ThreadPool& pool, const Tensor& x, const Tensor& ids, const Tensor& weights, const MoeWeights& experts,
                 Tensor out, bool bf16_activations = false, bool row_invariant = false);

}  // namespace rs::cpu
