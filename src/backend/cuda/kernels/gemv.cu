// GEMV for few activation rows (decode): each warp streams two weight rows once, 16 bytes per lane per step, decoding
// f32/bf16/f16/MXFP4 in registers, and dots them with up to 8 activation rows of its chunk. f32 accumulation.
// Memory-bound: the weight bytes are read once per chunk, activations come from L1/L2.
#include "backend/cuda/cuda_check.cuh"
#include "backend/cuda/kernels/weight_decode.cuh"

namespace rs::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;
constexpr int kRowsPerWarp = 2;  // output features per warp

// 16-byte vectors per row a lane has in flight. MXFP4 packs 32 weights per vector (decode-heavy, register-hungry).
template <WeightFormat F, int NT>
constexpr int kUnroll = F != WeightFormat::kMxfp4 ? 4
                        : NT >= 4                 ? 1
                                                  : 2;

template <WeightFormat F, int NT>
__global__ void __launch_bounds__(kWarpsPerBlock * 32) gemv_kernel(LinearArgs a) {
  using Traits = WeightTraits<F>;
  constexpr int kPerWord = Traits::kPerWord, kPerVec = Traits::kPerVec;
  int group, count;
  int64_t first_row;
  if (!block_chunk(a.rows, group, first_row, count)) return;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t o0 = (static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + warp) * kRowsPerWarp;
  if (o0 >= a.out_features) return;
  const bool has1 = o0 + 1 < a.out_features;
  const int64_t o1 = has1 ? o0 + 1 : o0;
  const int64_t vecs = a.in_features / kPerVec;
  const uint4* w0 = static_cast<const uint4*>(group_weight(a.w, group)) + o0 * vecs;
  const uint4* w1 = static_cast<const uint4*>(group_weight(a.w, group)) + o1 * vecs;
  const uint8_t* s0 = nullptr;
  const uint8_t* s1 = nullptr;
  if constexpr (F == WeightFormat::kMxfp4) {
    s0 = group_scales(a.w, group) + o0 * vecs;
    s1 = group_scales(a.w, group) + o1 * vecs;
  }
  const float* xr[NT];
#pragma unroll
  for (int t = 0; t < NT; ++t) {
    const int64_t r = first_row + min(t, count - 1);  // rows past the chunk repeat its last row; never stored
    xr[t] = a.x + (a.x_rows ? a.x_rows[r] : r) * a.x_stride;
  }
  float acc0[NT], acc1[NT];
#pragma unroll
  for (int t = 0; t < NT; ++t) acc0[t] = acc1[t] = 0.0f;

  // kUnroll vectors of each row are loaded before any is used: enough bytes in flight per SM to cover HBM latency.
  for (int64_t v0 = lane; v0 < vecs; v0 += 32 * kUnroll<F, NT>) {
    uint4 r0[kUnroll<F, NT>], r1[kUnroll<F, NT>];
#pragma unroll
    for (int u = 0; u < kUnroll<F, NT>; ++u) {
      const int64_t v = v0 + 32 * u;
      if (v < vecs) {
        r0[u] = __ldg(w0 + v);
        r1[u] = __ldg(w1 + v);
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll<F, NT>; ++u) {
      const int64_t v = v0 + 32 * u;
      if (v >= vecs) break;
      const uint32_t words0[4] = {r0[u].x, r0[u].y, r0[u].z, r0[u].w};
      const uint32_t words1[4] = {r1[u].x, r1[u].y, r1[u].z, r1[u].w};
      float p0[NT], p1[NT];
#pragma unroll
      for (int t = 0; t < NT; ++t) p0[t] = p1[t] = 0.0f;
#pragma unroll
      for (int wi = 0; wi < 4; ++wi) {
        float wa[kPerWord], wb[kPerWord];
        decode_word<F>(words0[wi], wa);
        decode_word<F>(words1[wi], wb);
#pragma unroll
        for (int t = 0; t < NT; ++t) {
          float xv[kPerWord];
          load_floats<kPerWord>(xr[t] + v * kPerVec + wi * kPerWord, xv);
#pragma unroll
          for (int e = 0; e < kPerWord; ++e) {
            p0[t] = fmaf(wa[e], xv[e], p0[t]);
            p1[t] = fmaf(wb[e], xv[e], p1[t]);
          }
        }
      }
      float sc0 = 1.0f, sc1 = 1.0f;
      if constexpr (F == WeightFormat::kMxfp4) {
        sc0 = e8m0_to_float(s0[v]);
        sc1 = e8m0_to_float(s1[v]);
      }
#pragma unroll
      for (int t = 0; t < NT; ++t) {
        acc0[t] = fmaf(sc0, p0[t], acc0[t]);
        acc1[t] = fmaf(sc1, p1[t], acc1[t]);
      }
    }
  }
#pragma unroll
  for (int t = 0; t < NT; ++t) {
    acc0[t] = warp_sum(acc0[t]);
    acc1[t] = warp_sum(acc1[t]);
  }
  if (lane == 0) {
    const float b0 = group_bias(a.w, group, o0), b1 = group_bias(a.w, group, o1);
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      if (t >= count) break;
      float* out = a.out + (first_row + t) * a.out_stride;
      out[o0] = acc0[t] + b0;
      if (has1) out[o1] = acc1[t] + b1;
    }
  }
}

template <WeightFormat F>
void launch_for_format(const LinearArgs& a, int32_t rows_per_chunk, cudaStream_t stream) {
  const dim3 grid(
      static_cast<unsigned>(ceil_div(a.out_features, kWarpsPerBlock * kRowsPerWarp)),
      static_cast<unsigned>(a.rows.list ? a.rows.max_chunks : ceil_div(a.rows.total_rows, a.rows.chunk_rows)));
  const int threads = kWarpsPerBlock * 32;
  if (rows_per_chunk <= 1) {
    gemv_kernel<F, 1><<<grid, threads, 0, stream>>>(a);
  } else if (rows_per_chunk <= 2) {
    gemv_kernel<F, 2><<<grid, threads, 0, stream>>>(a);
  } else if (rows_per_chunk <= 4) {
    gemv_kernel<F, 4><<<grid, threads, 0, stream>>>(a);
  } else {
    gemv_kernel<F, 8><<<grid, threads, 0, stream>>>(a);
  }
  RS_CUDA_CHECK_LAUNCH();
}

int elements_per_vector(WeightFormat format) {
  switch (format) {
    case WeightFormat::kF32: return WeightTraits<WeightFormat::kF32>::kPerVec;
    case WeightFormat::kMxfp4: return WeightTraits<WeightFormat::kMxfp4>::kPerVec;
    default: return WeightTraits<WeightFormat::kBF16>::kPerVec;
  }
}

}  // namespace

bool gemv_supported(WeightFormat format, int64_t in_features, const float* x, int64_t x_stride, const void* weight) {
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  return in_features % elements_per_vector(format) == 0 && x_stride % 4 == 0 && aligned(x) &&
         (weight == nullptr || aligned(weight));
}

void launch_gemv(const LinearArgs& a, int32_t rows_per_chunk, cudaStream_t stream) {
  RS_CHECK(rows_per_chunk >= 1 && rows_per_chunk <= kGemvMaxRows, "gemv chunk of {} rows", rows_per_chunk);
  if (a.out_features == 0) return;
  switch (a.format) {
    case WeightFormat::kF32: return launch_for_format<WeightFormat::kF32>(a, rows_per_chunk, stream);
    case WeightFormat::kBF16: return launch_for_format<WeightFormat::kBF16>(a, rows_per_chunk, stream);
    case WeightFormat::kF16: return launch_for_format<WeightFormat::kF16>(a, rows_per_chunk, stream);
    case WeightFormat::kMxfp4: return launch_for_format<WeightFormat::kMxfp4>(a, rows_per_chunk, stream);
  }
}

}  // namespace rs::cuda
