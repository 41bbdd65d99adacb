// Device building blocks of the CUDA sampler (sample.cu): 64-bit token keys that order logits as the reference
// sampler does, the reference's arithmetic rounding for rounding, and block-wide reductions, scans, sorts and passes
// over a row of logits. Every thread of the block calls the block-wide ones and gets the result.
#pragma once

#include <cstdint>

#include "backend/cuda/kernels/device_utils.cuh"
#include "backend/sampling.h"

namespace rs::cuda::sample_primitives {

using Key = unsigned long long;  // the type shuffles and atomics take for 64 bits

constexpr int kGatherCap = 2048;  // tokens sorted in shared memory at once
constexpr int kLoads = 4;         // float4 loads in flight per thread in a pass over a row (latency bound otherwise)
constexpr unsigned kFull = 0xffffffffu;

// ---- keys ----

__device__ __forceinline__ uint32_t ordered_bits(float v) {
  uint32_t u = __float_as_uint(v);
  if ((u << 1) == 0) u = 0;  // -0 == +0: equal logits, so the tie goes to the lower id
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
__device__ __forceinline__ float from_ordered_bits(uint32_t o) {
  return __uint_as_float((o & 0x80000000u) ? (o & 0x7fffffffu) : ~o);
}
// 0 sorts below every token.
__device__ __forceinline__ Key make_key(float v, int32_t id) {
  return (static_cast<Key>(ordered_bits(v)) << 32) | (0xffffffffu - static_cast<uint32_t>(id));
}
__device__ __forceinline__ int32_t key_id(Key k) {
  return static_cast<int32_t>(0xffffffffu - static_cast<uint32_t>(k));
}
__device__ __forceinline__ float key_value(Key k) { return from_ordered_bits(static_cast<uint32_t>(k >> 32)); }

// ---- the reference's arithmetic, rounding for rounding (explicit intrinsics: nvcc contracts only where meant) ----

// (v - top) * inv_t: float difference, double product.
__device__ __forceinline__ double scaled(float v, float top, double inv_t) {
  return __dmul_rn(static_cast<double>(__fsub_rn(v, top)), inv_t);
}
__device__ __forceinline__ double weight(float v, float top, double inv_t) { return exp(scaled(v, top, inv_t)); }

__device__ __forceinline__ float penalised(float v, int32_t output_count, const SampleRowSpec& s) {
  if (s.repetition_penalty != 1.0f)
    v = v > 0.0f ? __fdiv_rn(v, s.repetition_penalty) : __fmul_rn(v, s.repetition_penalty);
  // count * frequency + presence as one FMA: GCC contracts the reference's expression so on any FMA host
  // (-march=native, C++'s default -ffp-contract=fast).
  if (output_count > 0)
    v = __fsub_rn(v, __fmaf_rn(s.frequency_penalty, static_cast<float>(output_count), s.presence_penalty));
  return v;
}

// log-softmax of a raw logit as the reference rounds it: float difference, then double.
__device__ __forceinline__ float logprob_of(float raw, float raw_max, double log_sum) {
  return static_cast<float>(static_cast<double>(__fsub_rn(raw, raw_max)) - log_sum);
}

// Device copies of rs::splitmix64 / rs::sample_uniform (bit-identical draws).
__device__ __forceinline__ uint64_t splitmix64_device(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
__device__ __forceinline__ double sample_uniform_device(uint64_t seed, uint64_t step) {
  return static_cast<double>(splitmix64_device(splitmix64_device(seed) ^ step) >> 11) * 0x1.0p-53;
}

__device__ __forceinline__ bool is_truncated(const SampleRowSpec& s) {
  return !s.greedy && !(s.top_k <= 0 && s.top_p >= 1.0f && s.min_p <= 0.0f);
}

// ---- block-wide building blocks (every thread of the block calls them and gets the result) ----

struct MaxOp {
  template <typename T>
  __device__ T operator()(T a, T b) const {
    return a > b ? a : b;
  }
};
struct MinOp {
  template <typename T>
  __device__ T operator()(T a, T b) const {
    return a < b ? a : b;
  }
};
struct SumOp {
  template <typename T>
  __device__ T operator()(T a, T b) const {
    return a + b;
  }
};

// Butterfly: every lane combines the same operands in the same order, so all lanes agree bit for bit.
template <typename T, typename Op>
__device__ __forceinline__ T warp_reduce(T v, Op op) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v = op(v, __shfl_xor_sync(kFull, v, offset));
  return v;
}

// Fixed order: the warps' results are combined in warp order.
template <int kThreads, typename T, typename Op>
__device__ T block_reduce(T v, Op op) {
  constexpr int kWarps = kThreads / 32;
  __shared__ T partial[kWarps];
  v = warp_reduce(v, op);
  __syncthreads();  // partial may still be read by a previous call
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = v;
  __syncthreads();
  T r = partial[0];
#pragma unroll
  for (int w = 1; w < kWarps; ++w) r = op(r, partial[w]);
  return r;
}

// Inclusive scan in thread order. *exclusive is exactly the previous thread's inclusive value (0 for thread 0) and
// *total exactly the last thread's, so running totals built from them stay consistent with each other.
template <int kThreads>
__device__ double block_scan(double v, double* exclusive, double* total) {
  constexpr int kWarps = kThreads / 32;
  __shared__ double warp_totals[kWarps];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
  for (int offset = 1; offset < 32; offset <<= 1) {
    const double up = __shfl_up_sync(kFull, v, offset);
    if (lane >= offset) v += up;
  }
  __syncthreads();
  if (lane == 31) warp_totals[warp] = v;
  __syncthreads();
  double offset = 0.0, all = 0.0;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) {
    if (w == warp) offset = all;
    all += warp_totals[w];
  }
  v = offset + v;
  const double previous = __shfl_up_sync(kFull, v, 1);
  *exclusive = lane == 0 ? offset : previous;
  *total = all;
  return v;
}

// Smallest i in [0, n) with pred(i), or n.
template <int kThreads, typename Pred>
__device__ int first_index(int n, Pred pred) {
  int best = n;
  for (int i = threadIdx.x; i < n; i += kThreads)
    if (pred(i)) {
      best = i;
      break;
    }
  return block_reduce<kThreads>(best, MinOp{});
}

// Visits every logit of the row once: f(i, x[i], true) on some thread. Each thread keeps kVec float4 loads in flight
// (a pass is bound by load latency otherwise); the row need not be 16-byte aligned (scalar head and tail). Every
// thread makes the same calls, some with valid = false, so that f may use warp collectives.
template <int kThreads, int kVec, typename F>
__device__ __forceinline__ void for_each_logit(const float* x, int vocab, F&& f) {
  const int head = min(vocab, static_cast<int>(((16 - (reinterpret_cast<uintptr_t>(x) & 15)) & 15) / 4));
  const int body = (vocab - head) / 4, rest = vocab - head - 4 * body;
  const float4* x4 = reinterpret_cast<const float4*>(x + head);
  for (int base = 0; base < body; base += kThreads * kVec) {
    float4 v[kVec];
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      const int j = base + k * kThreads + static_cast<int>(threadIdx.x);
      v[k] = j < body ? x4[j] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      const int j = base + k * kThreads + static_cast<int>(threadIdx.x), i = head + 4 * j;
      f(i, v[k].x, j < body);
      f(i + 1, v[k].y, j < body);
      f(i + 2, v[k].z, j < body);
      f(i + 3, v[k].w, j < body);
    }
  }
  const int t = threadIdx.x, i = t < head ? t : head + 4 * body + (t - head);
  const bool valid = t < head + rest;
  f(i, valid ? x[i] : 0.0f, valid);
}

// Like for_each_logit, but calls f(i, x[i]) only for the logits that pass keep(i, x[i]) (a cheap test), in a loop
// over them: a sparse pass then skips the work instead of predicating it away.
template <int kThreads, int kVec, typename Keep, typename F>
__device__ __forceinline__ void for_each_kept_logit(const float* x, int vocab, Keep&& keep, F&& f) {
  const int head = min(vocab, static_cast<int>(((16 - (reinterpret_cast<uintptr_t>(x) & 15)) & 15) / 4));
  const int body = (vocab - head) / 4, rest = vocab - head - 4 * body;
  const float4* x4 = reinterpret_cast<const float4*>(x + head);
  for (int base = 0; base < body; base += kThreads * kVec) {
    float4 v[kVec];
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      const int j = base + k * kThreads + static_cast<int>(threadIdx.x);
      v[k] = j < body ? x4[j] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      const int j = base + k * kThreads + static_cast<int>(threadIdx.x), i = head + 4 * j;
      if (j >= body) continue;
      unsigned mask = (keep(i, v[k].x) ? 1u : 0u) | (keep(i + 1, v[k].y) ? 2u : 0u) | (keep(i + 2, v[k].z) ? 4u : 0u) |
                      (keep(i + 3, v[k].w) ? 8u : 0u);
      while (mask) {
        const int e = __ffs(mask) - 1;
        mask &= mask - 1;
        f(i + e, e == 0 ? v[k].x : e == 1 ? v[k].y : e == 2 ? v[k].z : v[k].w);
      }
    }
  }
  const int t = threadIdx.x, i = t < head ? t : head + 4 * body + (t - head);
  if (t < head + rest && keep(i, x[i])) f(i, x[i]);
}

// Bitonic sort of keys[0, n) (n <= kGatherCap) into descending order, padding to a power of two with 0 keys.
template <int kThreads>
__device__ void sort_descending(Key* keys, int n) {
  if (n <= kThreads) {  // few: each key's rank is the number of larger keys (keys are distinct)
    const Key mine = threadIdx.x < n ? keys[threadIdx.x] : 0;
    int rank = 0;
    if (threadIdx.x < n)
      for (int j = 0; j < n; ++j) rank += keys[j] > mine;
    __syncthreads();
    if (threadIdx.x < n) keys[rank] = mine;
    __syncthreads();
    return;
  }
  int size = 1;
  while (size < n) size <<= 1;
  for (int i = n + threadIdx.x; i < size; i += kThreads) keys[i] = 0;
  __syncthreads();
  for (int k = 2; k <= size; k <<= 1)
    for (int j = k >> 1; j > 0; j >>= 1) {
      for (int i = threadIdx.x; i < size / 2; i += kThreads) {
        const int lo = 2 * j * (i / j) + i % j, hi = lo + j;
        const Key a = keys[lo], b = keys[hi];
        if ((a < b) == ((lo & k) == 0)) keys[lo] = b, keys[hi] = a;
      }
      __syncthreads();
    }
}

// prefix[i] = weight of keys[0] + ... + keys[i] (keys sorted, n <= kGatherCap): runs of consecutive keys per thread,
// combined by a block scan.
template <int kThreads>
__device__ void prefix_weights(const Key* keys, int n, float top, double inv_t, double* prefix) {
  constexpr int kPer = kGatherCap / kThreads;
  const int first = threadIdx.x * kPer;
  double w[kPer];
  double sum = 0.0;
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    w[k] = first + k < n ? weight(key_value(keys[first + k]), top, inv_t) : 0.0;
    sum += w[k];
  }
  double run, total;
  block_scan<kThreads>(sum, &run, &total);
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    run += w[k];
    if (first + k < n) prefix[first + k] = run;
  }
  __syncthreads();
}

}  // namespace rs::cuda::sample_primitives
