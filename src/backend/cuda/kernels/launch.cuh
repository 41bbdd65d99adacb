// Kernel launches with programmatic dependent launch (PDL, sm_90): a kernel may be scheduled while the one before it in
// the stream is still running, so its launch latency and prologue (a weight prefetch) overlap the previous kernel's
// tail. Decode steps are hundreds of short kernels; without this each boundary idles the GPU for microseconds.
//
// Contract for every kernel launched through launch_kernel: it calls pdl_wait() before it reads memory an earlier
// kernel writes or writes memory an earlier kernel reads (pdl_wait returns once the previous grid has completed and its
// writes are visible), in every thread block, early returns included; it may call pdl_launch_dependents() after that to
// let the next kernel be scheduled. Work before pdl_wait() may only read memory no kernel writes (weights).
#pragma once

#include <cuda_runtime.h>

#include <utility>

#include "backend/cuda/cuda_check.cuh"

namespace rs::cuda {

// Process-wide: on when the device supports it (sm_90+) and not disabled (BackendOptions::programmatic_launch).
void set_programmatic_launch(bool enabled);
bool programmatic_launch();

template <typename... Params, typename... Args>
void launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, Args&&... args) {
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  config.attrs = &attribute;
  config.numAttrs = programmatic_launch() ? 1 : 0;
  RS_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...));
}

#ifdef __CUDACC__
// Waits for the previous kernel in the stream (no-op when it was launched without PDL or before sm_90).
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Lets the next kernel in the stream be scheduled once every block of this one has called it (or exited).
__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Both, for kernels with nothing to do before the wait.
__device__ __forceinline__ void pdl_enter() {
  pdl_wait();
  pdl_launch_dependents();
}
#endif

}  // namespace rs::cuda
