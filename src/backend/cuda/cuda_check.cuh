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

#define RS_CUBLAS_CHECK(expr)                                                                                   \
  do {                                                                                                          \
    const cublasStatus_t rs_cublas_status_ = (expr);                                                            \
    if (rs_cublas_status_ != CUBLAS_STATUS_SUCCESS) [[unlikely]]                                                \
      ::rs::throw_error(__FILE__, __LINE__,                                                                     \
                        ::fmt::format("cuBLAS error {} in {}", cublasGetStatusName(rs_cublas_status_), #expr)); \
  } while (0)
