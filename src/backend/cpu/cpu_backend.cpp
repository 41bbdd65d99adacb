#include "backend/cpu/cpu_backend.h"

#include <cblas.h>

#include <cstring>

#include "backend/cpu/kernels/gemm_bf16.h"
#include "backend/cpu/kernels/kernels.h"

namespace rs::cpu {

CpuBackend::CpuBackend(int num_threads, bool bf16_gemm)
    : pool_(num_threads > 0 ? num_threads : hardware_threads()), bf16_gemm_(bf16_gemm) {
  // We split GEMMs across our own pool; OpenBLAS must not spawn threads of its own inside them.
  openblas_set_num_threads(1);
}

std::string CpuBackend::name() const {
  return fmt::format("cpu ({} threads, {} GEMM)", pool_.num_threads(), bf16_gemm_ ? "bf16" : "f32");
}

Buffer CpuBackend::alloc(size_t bytes) { return Buffer::host(bytes); }

void CpuBackend::copy(Tensor dst, const Tensor& src) {
  RS_CHECK(dst.bytes() == src.bytes(), "copy of {} bytes into {} bytes", src.bytes(), dst.bytes());
  if (src.bytes() != 0) std::memcpy(dst.data(), src.data(), src.bytes());  // empty tensors may have null data
}

void CpuBackend::prepare_linear(LinearWeight& w, std::vector<Buffer>& keep_alive) {
  if (!bf16_gemm_ || !has_bf16_gemm() || w.format != LinearWeight::Format::kDense || w.weight.dtype() != DType::kBF16)
    return;
  const int64_t elements = packed_elements(w.out_features, w.in_features);
  keep_alive.push_back(Buffer::host(elements * sizeof(uint16_t)));
  w.packed = Tensor(keep_alive.back().data(), DType::kBF16, {elements});
  pack_bf16_weight(w.weight.data_as<uint16_t>(), w.out_features, w.in_features, w.packed.data_as<uint16_t>());
}

void CpuBackend::embedding(const Tensor& table, const Tensor& ids, Tensor out) {
  cpu::embedding(pool_, table, ids, out);
}
void CpuBackend::rms_norm(const Tensor& x, const Tensor& weight, float eps, bool add_one, Tensor out) {
  cpu::rms_norm(pool_, x, weight, eps, add_one, out);
}
void CpuBackend::linear(const Tensor& x, const LinearWeight& w, const Tensor& bias, Tensor out) {
  cpu::linear(pool_, x, w, bias, out, bf16_gemm_);
}
void CpuBackend::rope(Tensor x, const Tensor& positions, const Tensor& cos_sin, int32_t rotary_dim) {
  cpu::rope(pool_, x, positions, cos_sin, rotary_dim);
}
void CpuBackend::store_kv(const Tensor& k, const Tensor& v, Tensor k_cache, Tensor v_cache, const BatchView& batch) {
  cpu::store_kv(k, v, k_cache, v_cache, batch);
}
void CpuBackend::attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const BatchView& batch,
                           const AttentionParams& params, Tensor out) {
  cpu::attention(pool_, q, k_cache, v_cache, batch, params, out);
}
void CpuBackend::add(const Tensor& a, const Tensor& b, Tensor out) { cpu::add(pool_, a, b, out); }
void CpuBackend::silu_mul(const Tensor& gate_up, Tensor out) { cpu::silu_mul(pool_, gate_up, out); }
void CpuBackend::gather_rows(const Tensor& x, const Tensor& rows, Tensor out) { cpu::gather_rows(x, rows, out); }
void CpuBackend::moe_route(const Tensor& logits, MoeRouting routing, bool renormalize, Tensor ids, Tensor weights) {
  cpu::moe_route(logits, routing, renormalize, ids, weights);
}
void CpuBackend::moe_experts(const Tensor& x, const Tensor& ids, const Tensor& weights, const MoeWeights& experts,
                             Tensor out) {
  cpu::moe_experts(pool_, x, ids, weights, experts, out, bf16_gemm_);
}

}  // namespace rs::cpu
