// CUDA backend factory. This header includes no CUDA headers, so backend.cpp and tests compile with the host compiler.
#pragma once

#include <memory>
#include <string>

#include "backend/backend.h"

namespace rs::cuda {

// The CUDA backend on device `index` (one stream, cuBLAS, kernels in kernels/*.cu). Throws rs::Error when the device
// is absent or CUDA fails to initialise. Uses options.exact_f32 (bf16 GEMMs keep f32 activations, hi/lo split, instead
// of rounding them to bf16 once), options.attention and options.programmatic_launch.
std::unique_ptr<Backend> make_cuda_backend(int index, const BackendOptions& options = {});

// Number of usable CUDA devices; 0 when there is no driver or no device (never throws).
int cuda_device_count();

}  // namespace rs::cuda
