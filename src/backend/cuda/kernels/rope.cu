// Rotary position embedding on CUDA: NeoX half-split pairs (i, i + d/2) over the first rotary_dim dims of each head,
// rotated in place with a cos|sin row per position (scaling folded into the table by model/rope_table).
#include "backend/cuda/cuda_check.cuh"
#include "backend/cuda/kernels/device_utils.cuh"
#include "backend/cuda/kernels/launch.cuh"

namespace rs::cuda {
namespace {

// One block per token; threads stride over (head, pair).
__global__ void rope_kernel(float* x, int64_t heads, int64_t head_dim, const int32_t* positions, const float* cos_sin,
                            int64_t max_positions, int32_t rotary_dim, uint32_t* error_flags) {
  pdl_enter();
  const int64_t t = blockIdx.x;
  const int32_t pos = positions[t];
  if (pos < 0 || pos >= max_positions) {
    if (threadIdx.x == 0) set_error(error_flags, kErrPosition);
    return;
  }
  const int32_t half = rotary_dim / 2;
  const float* c = cos_sin + static_cast<int64_t>(pos) * rotary_dim;
  const float* s = c + half;
  for (int64_t item = threadIdx.x; item < heads * half; item += blockDim.x) {
    const int64_t h = item / half;
    const int32_t i = static_cast<int32_t>(item % half);
    float* v = x + (t * heads + h) * head_dim;
    const float a = v[i], b = v[i + half];
    v[i] = a * c[i] - b * s[i];
    v[i + half] = b * c[i] + a * s[i];
  }
}

}  // namespace

void launch_rope(float* x, int64_t num_tokens, int64_t heads, int64_t head_dim, const int32_t* positions,
                 const float* cos_sin, int64_t max_positions, int32_t rotary_dim, uint32_t* error_flags,
                 cudaStream_t stream) {
  if (num_tokens == 0) return;
  launch_kernel(rope_kernel, num_tokens, 256, 0, stream, x, heads, head_dim, positions, cos_sin, max_positions,
                rotary_dim, error_flags);
}

}  // namespace rs::cuda
