// RS_CUDA_CHECK / RS_CUBLAS_CHECK: turn CUDA runtime and cuBLAS status codes into rs::Error with file:line.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "base/error.h"

#define RS_CUDA_CHECK(expr)                                                                          \
  do {                                                                                               \
    const cudaError_t rs_cuda_status_ = (expr);                                                      \
    if (rs_cuda_status_ != cudaSuccess) [[unlikely]]                                                 \
      ::rs::throw_error(__FILE__, __LINE__,                                                          \
                        ::fmt::format("CUDA error {} ({}) in {}", cudaGetErrorName(rs_cuda_status_), \
                                      cudaGetErrorString(rs_cuda_status_), #expr));                  \
  } while (0)

// RS_CUDA_ALLOC_CHECK(expr, bytes): as RS_CUDA_CHECK, but a failed allocation throws rs::OutOfMemory (the step that
// needed it fails with a 503; the process and the context go on: the error is not sticky and is cleared here).
#define RS_CUDA_ALLOC_CHECK(expr, bytes)                                                                         \
  do {                                                                                                           \
    const cudaError_t rs_alloc_status_ = (expr);                                                                 \
    if (rs_alloc_status_ == cudaErrorMemoryAllocation) [[unlikely]] {                                            \
      (void)cudaGetLastError();                                                                                  \
      size_t rs_free_ = 0, rs_total_ = 0;                                                                        \
      (void)cudaMemGetInfo(&rs_free_, &rs_total_);                                                               \
      throw ::rs::OutOfMemory(                                                                                   \
          ::fmt::format("CUDA out of memory: {:.2f} GiB requested, {:.2f} GiB of {:.2f} free",                   \
                        double(bytes) / (1 << 30), double(rs_free_) / (1 << 30), double(rs_total_) / (1 << 30)), \
          ::fmt::format("{}:{}", __FILE__, __LINE__));                                                           \
    }                                                                                                            \
    RS_CUDA_CHECK(rs_alloc_status_);                                                                             \
  } while (0)

#define RS_CUBLAS_CHECK(expr)                                                                                   \
  do {                                                                                                          \
    const cublasStatus_t rs_cublas_status_ = (expr);                                                            \
    if (rs_cublas_status_ != CUBLAS_STATUS_SUCCESS) [[unlikely]]                                                \
      ::rs::throw_error(__FILE__, __LINE__,                                                                     \
                        ::fmt::format("cuBLAS error {} in {}", cublasGetStatusName(rs_cublas_status_), #expr)); \
  } while (0)
