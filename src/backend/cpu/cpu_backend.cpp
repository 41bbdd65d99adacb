#include "backend/cpu/cpu_backend.h"

#include <cblas.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "backend/cpu/host_memory.h"
#include "backend/cpu/kernels/affine_parts.h"
#include "backend/cpu/kernels/gemm_affine.h"
#include "backend/cpu/kernels/gemm_bf16.h"
#include "backend/cpu/kernels/kernels.h"
#include "base/log.h"

namespace rs::cpu {

CpuBackend::CpuBackend(int num_threads, bool bf16_gemm, bool deterministic)
    : pool_(num_threads > 0 ? num_threads : hardware_threads()), bf16_gemm_(bf16_gemm), deterministic_(deterministic) {
  // We split GEMMs across our own pool; OpenBLAS must not spawn threads of its own inside them.
  openblas_set_num_threads(1);
  const HostMemory host = read_host_memory();
  if (host.cgroup_limit_bytes)
    RS_LOG_INFO("host memory: the cgroup limit {:.1f} GiB caps what this process may use ({:.1f} GiB of it free)",
                static_cast<double>(*host.cgroup_limit_bytes) / (1 << 30),
                static_cast<double>(host.available_bytes) / (1 << 30));
}

std::string CpuBackend::name() const {
  return fmt::format("cpu ({} threads, {} GEMM{})", pool_.num_threads(), bf16_gemm_ ? "bf16" : "f32",
                     deterministic_ ? ", deterministic" : "");
}

Buffer CpuBackend::alloc(size_t bytes) { return Buffer::host(bytes); }

MemoryInfo CpuBackend::memory_info() const {
  // Host RAM, capped by the process's cgroup limit (a container's): host_memory.h.
  const HostMemory host = read_host_memory();
  return {host.available_bytes, host.total_bytes};
}

void CpuBackend::copy(Tensor dst, const Tensor& src) {
  RS_CHECK(dst.bytes() == src.bytes(), "copy of {} bytes into {} bytes", src.bytes(), dst.bytes());
  if (src.bytes() != 0) std::memcpy(dst.data(), src.data(), src.bytes());  // empty tensors may have null data
}

void CpuBackend::prepare_linear(LinearWeight& w, std::vector<Buffer>& keep_alive) {
  if (!bf16_gemm_ || !has_bf16_gemm()) return;
  const bool bf16 = w.format == LinearWeight::Format::kDense && w.weight.dtype() == DType::kBF16;
  const bool fp8 = w.format == LinearWeight::Format::kFp8;
  const bool affine = w.format == LinearWeight::Format::kAffine;
  if (!bf16 && !fp8 && !affine) return;
  // 4- and 8-bit integer weights stay codes: kernels/gemm_affine reads them in place (bf16 activations); fused ones
  // widened by the loader get back their narrow rows (kernels/affine_parts). Steps of more than kAffineGemvTokens
  // rows decode the codes into bf16 panels per call, which costs more than the product at batch 8-32; while a quarter
  // of the free memory allows (none where it is unknown), a bf16 copy is kept for steps of more than 4 rows. Steps
  // of more than kAffineGemvTokens rows give the same bits either way; those of 5..kAffineGemvTokens rows run the
  // GEMV without a copy (bf16 activations, exact weights) and the GEMM with one (bf16 weights too).
  if (affine && affine_kernel_supports(w)) {
    if (w.packed_rows.empty()) {
      const std::vector<AffinePart> parts = compact_affine(w, keep_alive);
      if (!parts.empty()) w.packed_rows = store_parts(parts, keep_alive);
    }
    if (copy_budget_bytes_ < 0) copy_budget_bytes_ = static_cast<int64_t>(memory_info().free_bytes / 4);
    const int64_t copy_bytes = packed_elements(w.out_features, w.in_features) * 2;
    if (copied_bytes_ + copy_bytes > copy_budget_bytes_) {
      if (!copy_budget_spent_)
        RS_LOG_INFO(
            "integer weights: a {:.2f} GiB bf16 copy would pass the {:.2f} GiB budget (a quarter of the free memory; "
            "{:.2f} GiB used): it and any other that does not fit keep only their codes, and steps of more than {} "
            "rows decode them per call",
            static_cast<double>(copy_bytes) / (1 << 30), static_cast<double>(copy_budget_bytes_) / (1 << 30),
            static_cast<double>(copied_bytes_) / (1 << 30), kAffineGemvTokens);
      copy_budget_spent_ = true;
      return;
    }
    copied_bytes_ += copy_bytes;
  }
  // FP8 and other integer weights run through the bf16 kernels on the fast path: their values rounded to bf16 once (8
  // significant bits hold e4m3's 4 exactly; the scale adds the rounding), at bf16's memory and speed. --exact-f32
  // decodes them per call.
  std::vector<uint16_t> dequantized;
  if (fp8 || affine) {  // the values decode_affine_row gives, rounded: what kernels/gemm_affine's panel decode makes
    dequantized.resize(w.out_features * w.in_features);
    pool_.parallel_for(w.out_features, [&](int64_t begin, int64_t end) {
      std::vector<float> row(w.in_features);
      for (int64_t r = begin; r < end; ++r) {
        if (fp8)
          cpu::decode_fp8_row(w, r, row.data());
        else
          cpu::decode_affine_row(w, r, row.data());
        for (int64_t i = 0; i < w.in_features; ++i) dequantized[r * w.in_features + i] = f32_to_bf16(row[i]);
      }
    });
  }
  const int64_t elements = packed_elements(w.out_features, w.in_features);
  keep_alive.push_back(Buffer::host(elements * sizeof(uint16_t)));
  w.packed = Tensor(keep_alive.back().data(), DType::kBF16, {elements});
  pack_bf16_weight(fp8 || affine ? dequantized.data() : w.weight.data_as<uint16_t>(), w.out_features, w.in_features,
                   w.packed.data_as<uint16_t>());
}

void CpuBackend::embedding(const Tensor& table, const Tensor& ids, Tensor out) {
  cpu::embedding(pool_, table, ids, out);
}
void CpuBackend::embedding_shard(const Tensor& table, const Tensor& ids, int64_t first_id, int64_t vocab, Tensor out) {
  cpu::embedding(pool_, table, ids, out, first_id, vocab);
}
void CpuBackend::embedding_affine(const LinearWeight& table, const Tensor& ids, Tensor out) {
  embedding_affine_shard(table, ids, 0, table.out_features, out);
}
void CpuBackend::embedding_affine_shard(const LinearWeight& table, const Tensor& ids, int64_t first_id, int64_t vocab,
                                        Tensor out) {
  RS_CHECK(table.format == LinearWeight::Format::kAffine && table.input_order.empty() &&
               out.numel() == ids.numel() * table.in_features,
           "embedding_affine: ids {} of a [{}, {}] table into {}", ids.shape_string(), table.out_features,
           table.in_features, out.shape_string());
  const int32_t* id = ids.data_as<int32_t>();
  for (int64_t t = 0; t < ids.numel(); ++t)
    RS_CHECK(id[t] >= 0 && id[t] < vocab, "token id {} outside the vocabulary of {}", id[t], vocab);
  pool_.parallel_for(ids.numel(), [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      float* row = out.data_as<float>() + t * table.in_features;
      if (id[t] >= first_id && id[t] < first_id + table.out_features)
        cpu::decode_affine_row(table, id[t] - first_id, row);
      else
        std::fill(row, row + table.in_features, 0.0f);  // another rank's id (tensor parallelism)
    }
  });
}
void CpuBackend::rms_norm(const Tensor& x, const Tensor& weight, float eps, bool add_one, Tensor out) {
  cpu::rms_norm(pool_, x, weight, eps, add_one, out);
}
void CpuBackend::linear(const Tensor& x, const LinearWeight& w, const Tensor& bias, Tensor out) {
  cpu::linear(pool_, x, w, bias, out, bf16_gemm_, deterministic_);
}
void CpuBackend::rope(Tensor x, const Tensor& positions, const Tensor& cos_sin, int32_t rotary_dim) {
  cpu::rope(pool_, x, positions, cos_sin, rotary_dim);
}
void CpuBackend::store_kv(const Tensor& k, const Tensor& v, const KvCache& cache, const BatchView& batch) {
  cpu::store_kv(k, v, cache, batch);
}
void CpuBackend::attention(const Tensor& q, const KvCache& cache, const BatchView& batch, const AttentionParams& params,
                           Tensor out) {
  cpu::attention(pool_, q, cache, batch, params, out);
}
void CpuBackend::add(const Tensor& a, const Tensor& b, Tensor out) { cpu::add(pool_, a, b, out); }
void CpuBackend::add_rms_norm(Tensor x, const Tensor& delta, const Tensor& weight, float eps, bool add_one,
                              Tensor out) {
  cpu::add(pool_, x, delta, x);
  cpu::rms_norm(pool_, x, weight, eps, add_one, out);
}
void CpuBackend::qkv_prepare(const Tensor& qkv, const Tensor& q_norm, const Tensor& k_norm, float eps,
                             const Tensor& cos_sin, int32_t rotary_dim, const KvCache& cache, const BatchView& batch,
                             Tensor q_out) {
  const Tensor& k_cache = cache.k;
  const int64_t tokens = q_out.dim(0), heads = q_out.dim(1), hd = q_out.dim(2), kv_heads = k_cache.dim(1);
  const int64_t q_width = heads * hd, kv_width = kv_heads * hd, width = q_width + 2 * kv_width;
  RS_CHECK(qkv.numel() == tokens * width && k_cache.dim(2) == hd, "qkv_prepare: qkv {} for q {} and cache {}",
           qkv.shape_string(), q_out.shape_string(), k_cache.shape_string());
  // Split the rows into q_out and contiguous k, v, then run the unfused ops on them.
  qkv_scratch_.resize(2 * tokens * kv_width);
  float* k = qkv_scratch_.data();
  float* v = k + tokens * kv_width;
  const float* src = qkv.data_as<float>();
  for (int64_t t = 0; t < tokens; ++t) {
    const float* row = src + t * width;
    std::copy(row, row + q_width, q_out.data_as<float>() + t * q_width);
    std::copy(row + q_width, row + q_width + kv_width, k + t * kv_width);
    std::copy(row + q_width + kv_width, row + width, v + t * kv_width);
  }
  Tensor k3(k, DType::kF32, {tokens, kv_heads, hd}), v3(v, DType::kF32, {tokens, kv_heads, hd});
  if (!q_norm.empty()) cpu::rms_norm(pool_, q_out, q_norm, eps, false, q_out);
  if (!k_norm.empty()) cpu::rms_norm(pool_, k3, k_norm, eps, false, k3);
  cpu::rope(pool_, q_out, batch.positions, cos_sin, rotary_dim);
  cpu::rope(pool_, k3, batch.positions, cos_sin, rotary_dim);
  cpu::store_kv(k3, v3, cache, batch);
}
void CpuBackend::silu_mul(const Tensor& gate_up, Tensor out) { cpu::silu_mul(pool_, gate_up, out); }
void CpuBackend::gather_rows(const Tensor& x, const Tensor& rows, Tensor out) { cpu::gather_rows(x, rows, out); }
void CpuBackend::scatter_rows(const Tensor& x, const Tensor& rows, Tensor out, int64_t column) {
  RS_CHECK(x.dtype() == DType::kF32 && out.dtype() == DType::kF32 && x.dim(0) == rows.numel() && column >= 0 &&
               column + x.dim(-1) <= out.dim(-1),
           "scatter_rows: x {} rows {} out {} column {}", x.shape_string(), rows.shape_string(), out.shape_string(),
           column);
  cpu::scatter_rows(x, rows, out, column);
}
void CpuBackend::moe_route(const Tensor& logits, MoeRouting routing, bool renormalize, Tensor ids, Tensor weights) {
  cpu::moe_route(logits, routing, renormalize, ids, weights);
}
void CpuBackend::moe_experts(const Tensor& x, const Tensor& ids, const Tensor& weights, const MoeWeights& experts,
                             Tensor out) {
  cpu::moe_experts(pool_, x, ids, weights, experts, out, bf16_gemm_, deterministic_);
}
void CpuBackend::causal_conv1d(const Tensor& x, const Tensor& weight, Tensor conv_state, const StateBatchView& batch,
                               Tensor out) {
  cpu::causal_conv1d(pool_, x, weight, conv_state, batch, out);
}
void CpuBackend::gated_delta_rule(const Tensor& qkv, const Tensor& ba, const Tensor& a_log, const Tensor& dt_bias,
                                  Tensor state, const StateBatchView& batch, const GatedDeltaNetParams& params,
                                  Tensor out) {
  cpu::gated_delta_rule(pool_, qkv, ba, a_log, dt_bias, state, batch, params, out, deterministic_);
}
void CpuBackend::gated_rms_norm(const Tensor& x, const Tensor& z, const Tensor& weight, float eps, Tensor out) {
  cpu::gated_rms_norm(pool_, x, z, weight, eps, out);
}
void CpuBackend::sigmoid_mul(const Tensor& x, const Tensor& gate, Tensor out) { cpu::sigmoid_mul(pool_, x, gate, out); }
void CpuBackend::apply_token_bitmask(Tensor logits, const Tensor& bitmask) {
  RS_CHECK(logits.ndim() == 2 && logits.dtype() == DType::kF32 && bitmask.ndim() == 2 &&
               bitmask.dim(0) == logits.dim(0) && bitmask.dim(1) == (logits.dim(1) + 31) / 32 &&
               dtype_size(bitmask.dtype()) == 4,
           "apply_token_bitmask: logits {} bitmask {}", logits.shape_string(), bitmask.shape_string());
  cpu::apply_token_bitmask(logits, bitmask);
}

void CpuBackend::sample(Tensor logits, std::span<const SampleSpec> specs, std::span<SampledToken> out) {
  RS_CHECK(logits.ndim() == 2 && logits.dtype() == DType::kF32 && logits.dim(0) == static_cast<int64_t>(specs.size()) &&
               out.size() == specs.size(),
           "sample: logits {} for {} rows", logits.shape_string(), specs.size());
  const int64_t vocab = logits.dim(1);
  pool_.parallel_for(static_cast<int64_t>(specs.size()), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r)
      out[r] = sample_on_host(std::span<float>(logits.data_as<float>() + r * vocab, vocab), specs[r]);
  });
}

}  // namespace rs::cpu
