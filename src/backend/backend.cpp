#include "backend/backend.h"

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/kernels/kernels.h"
#ifdef RS_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace rs {

void check_kv_cache(const KvCache& cache, std::string_view backend) {
  const DType dtype = cache.k.dtype();
  RS_CHECK((dtype == DType::kF32 || dtype == DType::kBF16 || dtype == DType::kF8E4M3) && cache.v.dtype() == dtype,
           "{} KV cache must be f32, bf16 or fp8 e4m3 (K and V alike), not {} / {}", backend, dtype_name(dtype),
           dtype_name(cache.v.dtype()));
  RS_CHECK(dtype != DType::kF8E4M3 || (cache.k_scale > 0.0f && cache.v_scale > 0.0f),
           "FP8 KV cache scales must be positive (k {}, v {})", cache.k_scale, cache.v_scale);
}

// Refusals of the backends that have no recurrent-state kernels yet (CUDA: a later step of issue 12).
void Backend::causal_conv1d(const Tensor&, const Tensor&, Tensor, const StateBatchView&, Tensor) {
  RS_FAIL("backend {} has no gated-delta-net kernels (causal_conv1d)", name());
}
void Backend::gated_delta_rule(const Tensor&, const Tensor&, const Tensor&, const Tensor&, Tensor,
                               const StateBatchView&, const GatedDeltaNetParams&, Tensor) {
  RS_FAIL("backend {} has no gated-delta-net kernels (gated_delta_rule)", name());
}
void Backend::gated_rms_norm(const Tensor&, const Tensor&, const Tensor&, float, Tensor) {
  RS_FAIL("backend {} has no gated-delta-net kernels (gated_rms_norm)", name());
}
void Backend::embedding_shard(const Tensor& table, const Tensor& ids, int64_t first_id, int64_t vocab, Tensor out) {
  RS_CHECK(first_id == 0 && vocab == table.dim(0), "backend {} looks embeddings up only in whole tables", name());
  embedding(table, ids, out);
}
void Backend::embedding_affine_shard(const LinearWeight& table, const Tensor& ids, int64_t first_id, int64_t vocab,
                                     Tensor out) {
  RS_CHECK(first_id == 0 && vocab == table.out_features, "backend {} looks embeddings up only in whole tables", name());
  embedding_affine(table, ids, out);
}
void Backend::embedding_affine(const LinearWeight&, const Tensor&, Tensor) {
  RS_FAIL("backend {} looks embeddings up only from tables prepare_embedding made", name());
}
void Backend::sigmoid_mul(const Tensor&, const Tensor&, Tensor) {
  RS_FAIL("backend {} has no sigmoid_mul kernel", name());
}
void Backend::apply_token_bitmask(Tensor logits, const Tensor& bitmask) {
  RS_CHECK(logits.ndim() == 2 && logits.dtype() == DType::kF32 && bitmask.ndim() == 2 &&
               bitmask.dim(0) == logits.dim(0) && bitmask.dim(1) == (logits.dim(1) + 31) / 32 &&
               dtype_size(bitmask.dtype()) == 4,
           "apply_token_bitmask: logits {} bitmask {}", logits.shape_string(), bitmask.shape_string());
  const int64_t rows = logits.dim(0), vocab = logits.dim(1), words = bitmask.dim(1);
  std::vector<float> host_logits(static_cast<size_t>(rows * vocab));
  std::vector<uint32_t> host_bits(static_cast<size_t>(rows * words));
  const Tensor logits_host(host_logits.data(), DType::kF32, {rows, vocab});
  copy(logits_host, logits);
  copy(Tensor(host_bits.data(), bitmask.dtype(), {rows, words}), bitmask);
  synchronize();
  cpu::apply_token_bitmask(logits_host, Tensor(host_bits.data(), DType::kU32, {rows, words}));
  copy(logits, logits_host);
  synchronize();
}

std::unique_ptr<Backend> make_backend(const std::string& name, const BackendOptions& options) {
  if (name == "cpu")
    return std::make_unique<cpu::CpuBackend>(options.num_threads, !options.exact_f32, options.deterministic);
  if (name == "cuda" || name.rfind("cuda:", 0) == 0) {
#ifdef RS_HAVE_CUDA
    const int index = name == "cuda" ? 0 : std::stoi(name.substr(5));
    return cuda::make_cuda_backend(index, options);
#else
    RS_FAIL("backend '{}' requested but this build has no CUDA support (configure with -DRS_CUDA=ON)", name);
#endif
  }
  RS_FAIL("unknown backend '{}' (known: cpu, cuda[:N])", name);
}

}  // namespace rs
