// Structured output's token mask: logits of tokens whose bit is clear become -inf (CPU reference:
// cpu/kernels/token_bitmask.cpp). One thread per 32-token word, so each thread reads its mask word once.
#include <math_constants.h>

#include <algorithm>

#include "backend/cuda/kernels/device_utils.cuh"
#include "backend/cuda/kernels/kernels.cuh"
#include "backend/cuda/kernels/launch.cuh"

namespace rs::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void token_bitmask_kernel(float* logits, const uint32_t* bitmask, int32_t vocab, int32_t words) {
  pdl_enter();
  const int64_t row = blockIdx.y;
  const int32_t w = blockIdx.x * blockDim.x + threadIdx.x;
  if (w >= words) return;
  const uint32_t word = bitmask[row * words + w];
  if (word == 0xFFFFFFFFu) return;
  float* out = logits + row * vocab + int64_t{w} * 32;
  const int32_t count = min(32, vocab - w * 32);
  for (int32_t b = 0; b < count; ++b)
    if (!((word >> b) & 1u)) out[b] = -CUDART_INF_F;
}

}  // namespace

void launch_token_bitmask(float* logits, const uint32_t* bitmask, int32_t rows, int32_t vocab, cudaStream_t stream) {
  if (rows == 0 || vocab == 0) return;
  const int32_t words = (vocab + 31) / 32;
  const dim3 grid(static_cast<unsigned>((words + kThreads - 1) / kThreads), static_cast<unsigned>(rows));
  launch_kernel(token_bitmask_kernel, grid, kThreads, 0, stream, logits, bitmask, vocab, words);
}

}  // namespace rs::cuda
