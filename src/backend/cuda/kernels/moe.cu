// Mixture-of-experts kernels on CUDA: router top-k (both routing conventions), device-side grouping of (token, slot)
// pairs by expert (a counting sort that also cuts each expert's rows into GEMM chunks, so no host round trip), the two
// in one block for decode batches, and the weighted combine, summed per token in ascending expert id like the CPU
// reference.
#include <algorithm>
#include <climits>

#include "backend/cuda/cuda_check.cuh"
#include "backend/cuda/kernels/device_utils.cuh"
#include "backend/cuda/kernels/launch.cuh"

namespace rs::cuda {
namespace {

constexpr int kRouteWarps = 4;
constexpr int kMaxTopK = 32;
// The fused route + sort block: 16 warps route up to kRouteSortMaxTokens tokens (two each), then sort.
constexpr int kRouteSortWarps = 16;
constexpr int64_t kRouteSortMaxTokens = 32;

// Routes token t with one warp (its logits row staged in `row`, num_experts floats of shared memory): ids[t, :k] and
// weights[t, :k] in the router's convention. Ties go to the lower expert id.
__device__ void route_token(const float* logits, int64_t t, int32_t num_experts, int32_t top_k, bool softmax_first,
                            bool renormalize, float* row, int32_t* ids, float* weights) {
  const int lane = threadIdx.x % 32;
  for (int e = lane; e < num_experts; e += 32) row[e] = logits[t * num_experts + e];
  __syncwarp();
  if (softmax_first) {
    float max_logit = -INFINITY;
    for (int e = lane; e < num_experts; e += 32) max_logit = fmaxf(max_logit, row[e]);
    max_logit = warp_max(max_logit);
    float sum = 0.0f;
    for (int e = lane; e < num_experts; e += 32) sum += (row[e] = expf(row[e] - max_logit));
    sum = warp_sum(sum);
    for (int e = lane; e < num_experts; e += 32) row[e] /= sum;
    __syncwarp();
  }
  float picked[kMaxTopK];
  int32_t* out_ids = ids + t * top_k;
  for (int i = 0; i < top_k; ++i) {
    float best = -INFINITY;
    int best_id = INT_MAX;
    for (int e = lane; e < num_experts; e += 32)
      if (row[e] > best || (row[e] == best && e < best_id)) best = row[e], best_id = e;
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
      const float other = __shfl_xor_sync(0xffffffffu, best, offset);
      const int other_id = __shfl_xor_sync(0xffffffffu, best_id, offset);
      if (other > best || (other == best && other_id < best_id)) best = other, best_id = other_id;
    }
    if (best_id == INT_MAX) best_id = i;  // every remaining logit is -inf or NaN: keep ids distinct and valid
    picked[i] = best;
    if (lane == 0) out_ids[i] = best_id;
    __syncwarp();
    if (lane == best_id % 32) row[best_id] = -INFINITY;
    __syncwarp();
  }
  if (lane == 0) {
    float* out_w = weights + t * top_k;
    if (!softmax_first) {
      const float max_logit = picked[0];
      float sum = 0.0f;
      for (int i = 0; i < top_k; ++i) sum += (picked[i] = expf(picked[i] - max_logit));
      for (int i = 0; i < top_k; ++i) out_w[i] = picked[i] / sum;
    } else if (renormalize) {
      float sum = 0.0f;
      for (int i = 0; i < top_k; ++i) sum += picked[i];
      for (int i = 0; i < top_k; ++i) out_w[i] = picked[i] / sum;
    } else {
      for (int i = 0; i < top_k; ++i) out_w[i] = picked[i];
    }
  }
  __syncwarp();  // the row buffer is reused by the warp's next token
}

// One warp per token.
__global__ void moe_route_kernel(const float* logits, int64_t num_tokens, int32_t num_experts, int32_t top_k,
                                 bool softmax_first, bool renormalize, int32_t* ids, float* weights) {
  pdl_enter();
  extern __shared__ float rows[];
  const int warp = threadIdx.x / 32;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * kRouteWarps + warp;
  if (t >= num_tokens) return;
  route_token(logits, t, num_experts, top_k, softmax_first, renormalize, rows + warp * num_experts, ids, weights);
}

// Exclusive prefix sums of a and b over the block (every thread passes its values; blockDim.x a multiple of 32, at
// most 1024); `totals` is 64 ints of shared memory.
__device__ void block_exclusive_scan2(int32_t& a, int32_t& b, int32_t* totals) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  int32_t ia = a, ib = b;
#pragma unroll
  for (int offset = 1; offset < 32; offset <<= 1) {
    const int32_t ya = __shfl_up_sync(0xffffffffu, ia, offset), yb = __shfl_up_sync(0xffffffffu, ib, offset);
    if (lane >= offset) ia += ya, ib += yb;
  }
  if (lane == 31) totals[warp] = ia, totals[32 + warp] = ib;
  __syncthreads();
  if (warp == 0) {
    int32_t ta = lane < warps ? totals[lane] : 0, tb = lane < warps ? totals[32 + lane] : 0;
#pragma unroll
    for (int offset = 1; offset < 32; offset <<= 1) {
      const int32_t ya = __shfl_up_sync(0xffffffffu, ta, offset), yb = __shfl_up_sync(0xffffffffu, tb, offset);
      if (lane >= offset) ta += ya, tb += yb;
    }
    if (lane < warps) totals[lane] = ta, totals[32 + lane] = tb;  // inclusive over warps
  }
  __syncthreads();
  const int32_t base_a = warp > 0 ? totals[warp - 1] : 0, base_b = warp > 0 ? totals[32 + warp - 1] : 0;
  a = base_a + ia - a;
  b = base_b + ib - b;
  __syncthreads();  // totals may be reused
}

// The counting sort of the slots by expert, by one block (ids written by this block are visible after a barrier):
// each expert's rows in expert order, then cut into chunks of <= chunk_rows rows. `smem` holds 3E + 65 ints.
__device__ void sort_slots(const int32_t* ids, int64_t num_slots, int32_t top_k, int32_t num_experts,
                           int32_t chunk_rows, int32_t* pos_of_slot, int32_t* x_row_of_pos, int4* chunks,
                           int32_t* num_chunks, uint32_t* error_flags, int32_t* smem) {
  int32_t* counts = smem;                           // [E]
  int32_t* cursor = counts + num_experts;           // [E]
  int32_t* chunk_first = cursor + num_experts;      // [E + 1]
  int32_t* totals = chunk_first + num_experts + 1;  // [64]
  for (int e = threadIdx.x; e < num_experts; e += blockDim.x) counts[e] = 0;
  __syncthreads();
  for (int64_t s = threadIdx.x; s < num_slots; s += blockDim.x) {
    const int32_t e = ids[s];
    if (e >= 0 && e < num_experts) {
      atomicAdd(&counts[e], 1);
    } else {
      set_error(error_flags, kErrExpertId);
    }
  }
  __syncthreads();
  // Each thread owns a contiguous run of experts: its rows and chunks, scanned over the block.
  const int per_thread = (num_experts + blockDim.x - 1) / blockDim.x;
  const int e0 = min(num_experts, static_cast<int>(threadIdx.x) * per_thread), e1 = min(num_experts, e0 + per_thread);
  int32_t rows = 0, cuts = 0;
  for (int e = e0; e < e1; ++e) rows += counts[e], cuts += (counts[e] + chunk_rows - 1) / chunk_rows;
  block_exclusive_scan2(rows, cuts, totals);
  for (int e = e0; e < e1; ++e) {
    cursor[e] = rows;
    chunk_first[e] = cuts;
    rows += counts[e];
    cuts += (counts[e] + chunk_rows - 1) / chunk_rows;
  }
  if (e1 == num_experts && e0 < e1) chunk_first[num_experts] = cuts, *num_chunks = cuts;
  if (num_experts == 0 && threadIdx.x == 0) chunk_first[0] = 0, *num_chunks = 0;
  __syncthreads();
  for (int e = threadIdx.x; e < num_experts; e += blockDim.x) {
    const int32_t first = cursor[e];
    for (int32_t c = chunk_first[e], row = 0; c < chunk_first[e + 1]; ++c, row += chunk_rows)
      chunks[c] = make_int4(e, first + row, min(chunk_rows, counts[e] - row), 0);
  }
  __syncthreads();  // chunk writers read cursor[] before it advances
  for (int64_t s = threadIdx.x; s < num_slots; s += blockDim.x) {
    const int32_t e = ids[s];
    if (e < 0 || e >= num_experts) {
      pos_of_slot[s] = -1;
      continue;
    }
    const int32_t pos = atomicAdd(&cursor[e], 1);
    pos_of_slot[s] = pos;
    x_row_of_pos[pos] = static_cast<int32_t>(s / top_k);
  }
}

// Single block: counting sort of the slots by expert, then per expert its chunks of <= chunk_rows rows.
__global__ void moe_sort_kernel(const int32_t* ids, int64_t num_slots, int32_t top_k, int32_t num_experts,
                                int32_t chunk_rows, int32_t* pos_of_slot, int32_t* x_row_of_pos, int4* chunks,
                                int32_t* num_chunks, uint32_t* error_flags) {
  pdl_enter();
  extern __shared__ int32_t sort_smem[];
  sort_slots(ids, num_slots, top_k, num_experts, chunk_rows, pos_of_slot, x_row_of_pos, chunks, num_chunks, error_flags,
             sort_smem);
}

// Decode batches: the router's top-k and the sort in one block (one launch, not two dependent ones): each warp routes
// tokens warp, warp + warps, ..., then the block sorts the ids it wrote.
__global__ void moe_route_sort_kernel(const float* logits, int64_t num_tokens, int32_t num_experts, int32_t top_k,
                                      bool softmax_first, bool renormalize, int32_t* ids, float* weights,
                                      int32_t chunk_rows, int32_t* pos_of_slot, int32_t* x_row_of_pos, int4* chunks,
                                      int32_t* num_chunks, uint32_t* error_flags) {
  pdl_enter();
  extern __shared__ int32_t route_sort_smem[];  // warps x E floats of router rows | the sort's 3E + 65 ints
  const int warp = threadIdx.x / 32, warps = blockDim.x / 32;
  float* row = reinterpret_cast<float*>(route_sort_smem) + warp * num_experts;
  for (int64_t t = warp; t < num_tokens; t += warps)
    route_token(logits, t, num_experts, top_k, softmax_first, renormalize, row, ids, weights);
  __syncthreads();  // every id is written (global writes of this block are visible to it after the barrier)
  sort_slots(ids, num_tokens * top_k, top_k, num_experts, chunk_rows, pos_of_slot, x_row_of_pos, chunks, num_chunks,
             error_flags, route_sort_smem + warps * num_experts);
}

// Grid: (token, column block); each block orders its token's slots (top_k <= 32: an insertion sort) and sums its
// columns.
__global__ void moe_combine_kernel(const float* y, const int32_t* ids, const float* weights, const int32_t* pos_of_slot,
                                   int32_t top_k, int64_t hidden, float* out) {
  pdl_enter();
  __shared__ int32_t order[kMaxTopK];
  const int64_t t = blockIdx.x;
  if (threadIdx.x == 0) {  // insertion sort of the token's slots by expert id
    for (int i = 0; i < top_k; ++i) {
      int j = i;
      while (j > 0 && ids[t * top_k + order[j - 1]] > ids[t * top_k + i]) {
        order[j] = order[j - 1];
        --j;
      }
      order[j] = i;
    }
  }
  __syncthreads();
  for (int64_t h = blockIdx.y * static_cast<int64_t>(blockDim.x) + threadIdx.x; h < hidden;
       h += static_cast<int64_t>(gridDim.y) * blockDim.x) {
    float acc = 0.0f;
    for (int i = 0; i < top_k; ++i) {
      const int64_t slot = t * top_k + order[i];
      const int32_t pos = pos_of_slot[slot];
      if (pos >= 0) acc = fmaf(weights[slot], y[pos * hidden + h], acc);
    }
    out[t * hidden + h] = acc;
  }
}

}  // namespace

void launch_moe_route(const float* logits, int64_t num_tokens, int32_t num_experts, int32_t top_k, bool softmax_first,
                      bool renormalize, int32_t* ids, float* weights, cudaStream_t stream) {
  RS_CHECK(top_k >= 1 && top_k <= kMaxTopK && top_k <= num_experts, "moe top-k {} of {} experts", top_k, num_experts);
  const size_t smem = sizeof(float) * kRouteWarps * num_experts;
  RS_CHECK(smem <= 48 * 1024, "{} experts exceed the router kernel's shared memory", num_experts);
  if (num_tokens == 0) return;
  launch_kernel(moe_route_kernel, ceil_div(num_tokens, kRouteWarps), kRouteWarps * 32, smem, stream, logits, num_tokens,
                num_experts, top_k, softmax_first, renormalize, ids, weights);
}

void launch_moe_sort(const int32_t* ids, int64_t num_slots, int32_t top_k, int32_t num_experts, int32_t chunk_rows,
                     int32_t* pos_of_slot, int32_t* x_row_of_pos, int4* chunks, int32_t* num_chunks,
                     uint32_t* error_flags, cudaStream_t stream) {
  const size_t smem = sizeof(int32_t) * (3 * num_experts + 65);
  RS_CHECK(smem <= 48 * 1024, "{} experts exceed the MoE sort kernel's shared memory", num_experts);
  launch_kernel(moe_sort_kernel, 1, 1024, smem, stream, ids, num_slots, top_k, num_experts, chunk_rows, pos_of_slot,
                x_row_of_pos, chunks, num_chunks, error_flags);
}

bool moe_route_sort_fusable(int64_t num_tokens, int32_t num_experts) {
  return num_tokens <= kRouteSortMaxTokens &&
         sizeof(int32_t) * (kRouteSortWarps * num_experts + 3 * num_experts + 65) <= 48 * 1024;
}

void launch_moe_route_sort(const float* logits, int64_t num_tokens, int32_t num_experts, int32_t top_k,
                           bool softmax_first, bool renormalize, int32_t* ids, float* weights, int32_t chunk_rows,
                           int32_t* pos_of_slot, int32_t* x_row_of_pos, int4* chunks, int32_t* num_chunks,
                           uint32_t* error_flags, cudaStream_t stream) {
  RS_CHECK(top_k >= 1 && top_k <= kMaxTopK && top_k <= num_experts, "moe top-k {} of {} experts", top_k, num_experts);
  RS_CHECK(moe_route_sort_fusable(num_tokens, num_experts), "moe route+sort: {} tokens, {} experts", num_tokens,
           num_experts);
  const size_t smem = sizeof(int32_t) * (kRouteSortWarps * num_experts + 3 * num_experts + 65);
  launch_kernel(moe_route_sort_kernel, 1, kRouteSortWarps * 32, smem, stream, logits, num_tokens, num_experts, top_k,
                softmax_first, renormalize, ids, weights, chunk_rows, pos_of_slot, x_row_of_pos, chunks, num_chunks,
                error_flags);
}

void launch_moe_combine(const float* y, const int32_t* ids, const float* weights, const int32_t* pos_of_slot,
                        int64_t num_tokens, int32_t top_k, int64_t hidden, float* out, cudaStream_t stream) {
  RS_CHECK(top_k <= kMaxTopK, "moe top-k {} exceeds {}", top_k, kMaxTopK);
  if (num_tokens == 0) return;
  // A block per token and 256 columns: one block per token left batch-1 decode a single block streaming all of hidden
  // (9 us per gpt-oss layer on the H200).
  const dim3 grid(static_cast<unsigned>(num_tokens),
                  static_cast<unsigned>(std::min<int64_t>(ceil_div(hidden, 256), 65535)));
  launch_kernel(moe_combine_kernel, grid, 256, 0, stream, y, ids, weights, pos_of_slot, top_k, hidden, out);
}

}  // namespace rs::cuda
