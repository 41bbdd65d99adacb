#include "backend/backend.h"

#include "backend/cpu/cpu_backend.h"
#ifdef RS_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace rs {

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
void Backend::sigmoid_mul(const Tensor&, const Tensor&, Tensor) {
  RS_FAIL("backend {} has no sigmoid_mul kernel", name());
}

std::unique_ptr<Backend> make_backend(const std::string& name, const BackendOptions& options) {
  if (name == "cpu") return std::make_unique<cpu::CpuBackend>(options.num_threads, !options.exact_f32);
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
