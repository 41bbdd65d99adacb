#include "backend/backend.h"

#include "backend/cpu/cpu_backend.h"
#ifdef RS_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace rs {

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
