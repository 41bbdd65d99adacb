// GEMV for few activation rows (decode): each warp streams two weight rows (a K-slice of them when the block splits K),
// 16-byte vectors per lane, decoding f32/bf16/f16/MXFP4/FP8/int4/int8 in registers, and dots them with up to 8
// activation rows of its chunk. f32 accumulation. Memory-bound: the weight bytes are read once per chunk, activations
// come from L1/L2.
#include <algorithm>
#include <cstdint>

#include "backend/cuda/cuda_check.cuh"
#include "backend/cuda/kernels/launch.cuh"
#include "backend/cuda/kernels/weight_decode.cuh"

namespace rs::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;
constexpr int kRowsPerWarp = 2;  // weight rows per warp: two output features, or one gated (gate, up) feature

// 16-byte vectors per row a lane loads per batch. MXFP4 packs 32 weights per vector (decode-heavy, register-hungry).
// Double buffering: a warp issues batch i + 1's loads before it consumes batch i, so it always has loads in flight
// (a single buffer idles each warp's memory pipe while it computes). Measured on the H200 for batch-1 Qwen3-8B GEMVs
// graphed with PDL (session 9 lab): 4 vectors single-buffered 3.76 ms per 36 layers, 4 double-buffered 5.06 (spills
// at 64 registers), 2 double-buffered 3.59. MXFP4 (decoded in registers) and chunks of 4+ rows (MoE experts, whose
// dot products dominate) keep a single buffer.
// int4 packs MXFP4's 32 values per vector: the same single buffer (double buffering spilled at 64 registers).
template <WeightFormat F>
constexpr bool kWideVector = F == WeightFormat::kMxfp4 || F == WeightFormat::kInt4 || F == WeightFormat::kInt4Tiled;
template <WeightFormat F, int NT>
constexpr bool kDoubleBuffer = !kWideVector<F> && NT <= 2;
template <WeightFormat F, int NT>
constexpr int kUnroll = kDoubleBuffer<F, NT> ? 2
                        : !kWideVector<F>    ? 4
                        : NT >= 4            ? 1
                                             : 2;

// KS warps of a block share the same rows, each reading one K-slice; their partial sums are added in slice order
// (deterministic). Splitting K puts more warps (bytes in flight) on each SM and shortens each warp's serial chain of
// loads when a layer has few output features (o_proj, down_proj at batch 1).
template <WeightFormat F, int NT, int KS>
__global__ void __launch_bounds__(kWarpsPerBlock * 32, NT == 1 ? 4 : 0) gemv_kernel(LinearArgs a) {
  using Traits = WeightTraits<F>;
  constexpr int kPerWord = Traits::kPerWord, kPerVec = Traits::kPerVec, kU = kUnroll<F, NT>;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, part = warp % KS;
  // Plain: a warp computes features o0, o0 + 1 (weight rows r0, r1). Gated: one output o0 from a (gate, up) pair of
  // weight rows: o0 and o0 + glu_offset, or 2 o0 and 2 o0 + 1 (pair_act, interleaved), or row o0 of the gate and of the
  // up table.
  const bool pair = a.pair_act != PairActivation::kNone;
  const bool gated = a.glu_offset > 0 || pair;
  const int64_t unit = static_cast<int64_t>(blockIdx.x) * (kWarpsPerBlock / KS) + warp / KS;
  const int64_t o0 = gated ? unit : unit * kRowsPerWarp;
  const bool active = o0 < a.out_features;
  const bool has1 = gated || o0 + 1 < a.out_features;
  const bool two_tables = pair && a.w.up_table != nullptr;
  const int64_t row0 = pair && !two_tables ? 2 * o0 : o0;
  const int64_t row1 = two_tables ? o0 : pair ? 2 * o0 + 1 : a.glu_offset > 0 ? o0 + a.glu_offset : has1 ? o0 + 1 : o0;
  const int vecs = static_cast<int>(a.in_features / kPerVec);  // vectors per row (< 2^31: in_features is checked)
  const int slice = (vecs + KS - 1) / KS, v_begin = part * slice, v_end = min(vecs, v_begin + slice);
  const uint4* w0 = nullptr;
  const uint4* w1 = nullptr;
  const uint8_t* s0 = nullptr;
  const uint8_t* s1 = nullptr;
  const float* f0 = nullptr;  // FP8: the scale rows of rows 0 and 1 (one group: dense layers only)
  const float* f1 = nullptr;
  const float2* a0 = nullptr;  // integers: the (scale, bias) rows of rows 0 and 1 (one group: dense layers only)
  const float2* a1 = nullptr;
  const auto bind_rows = [&](int group) {
    w0 = static_cast<const uint4*>(group_weight(a.w, group)) + row0 * vecs;
    w1 = static_cast<const uint4*>(two_tables ? a.w.up_table[group] : group_weight(a.w, group)) + row1 * vecs;
    if constexpr (F == WeightFormat::kMxfp4) {
      s0 = group_scales(a.w, group) + row0 * vecs;
      s1 = (two_tables ? a.w.up_scale_table[group] : group_scales(a.w, group)) + row1 * vecs;
    }
    if constexpr (F == WeightFormat::kFp8) {
      f0 = a.w.fp8.scales + (row0 / a.w.fp8.block_rows) * a.w.fp8.cols;
      f1 = a.w.fp8.scales + (row1 / a.w.fp8.block_rows) * a.w.fp8.cols;
    }
    if constexpr (kAffineFormat<F>) {
      a0 = a.w.affine.pairs + row0 * a.w.affine.groups;
      a1 = a.w.affine.pairs + row1 * a.w.affine.groups;
    }
  };
  uint4 ra0[kU], ra1[kU], rb0[kU], rb1[kU];  // rb: the second buffer (double buffering only)
  const auto load_batch = [&](uint4(&r0)[kU], uint4(&r1)[kU], int v0) {
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int v = v0 + 32 * u;
      if (v < v_end) {
        r0[u] = __ldg(w0 + v);
        r1[u] = __ldg(w1 + v);
      }
    }
  };
  // One weight group (dense layers): the rows are known before the previous kernel ends, and weights are constant,
  // so the first batch is loaded before waiting for the activations (overlaps that kernel's tail under PDL).
  const bool dense = a.rows.list == nullptr;
  if (dense && active) {
    bind_rows(0);
    load_batch(ra0, ra1, v_begin + lane);
  }
  pdl_enter();
  int group, count;
  int64_t first_row;
  if (!block_chunk(a.rows, group, first_row, count)) return;  // the whole block: no barrier below is skipped
  if (!dense && active) {
    bind_rows(group);
    load_batch(ra0, ra1, v_begin + lane);
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

  const auto consume = [&](const uint4(&r0)[kU], const uint4(&r1)[kU], int v0) {
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int v = v0 + 32 * u;
      if (v >= v_end) break;
      const uint32_t words0[4] = {r0[u].x, r0[u].y, r0[u].z, r0[u].w};
      const uint32_t words1[4] = {r1[u].x, r1[u].y, r1[u].z, r1[u].w};
      if constexpr (F == WeightFormat::kInt4Tiled) {
        // Lane (v % 32) of tile v / 32: word wi, half j holds inputs tile * 1024 + wi * 256 + j * 128 + lane * 4 + c.
        const int base = (v >> 5) * 1024 + (v & 31) * 4;
#pragma unroll
        for (int wi = 0; wi < 4; ++wi) {
          float wa[8], wb[8];
          decode_word<F>(words0[wi], wa);
          decode_word<F>(words1[wi], wb);
#pragma unroll
          for (int j = 0; j < 2; ++j) {
            const int col = base + wi * 256 + j * 128;
            const float2 g0 = a0[col >> a.w.affine.group_shift], g1 = a1[col >> a.w.affine.group_shift];
#pragma unroll
            for (int t = 0; t < NT; ++t) {
              float xv[4];
              load_floats<4>(xr[t] + col, xv);
              float q0 = 0.0f, q1 = 0.0f;
#pragma unroll
              for (int c = 0; c < 4; ++c) q0 = fmaf(wa[4 * j + c], xv[c], q0), q1 = fmaf(wb[4 * j + c], xv[c], q1);
              const float xs = (xv[0] + xv[1]) + (xv[2] + xv[3]);
              acc0[t] = fmaf(g0.x, q0, fmaf(g0.y, xs, acc0[t]));  // sum (s q + b) x = s (sum q x) + b (sum x)
              acc1[t] = fmaf(g1.x, q1, fmaf(g1.y, xs, acc1[t]));
            }
          }
        }
      } else {
        float p0[NT], p1[NT], xs[NT];  // xs: integers' sum of the vector's activations, which the bias multiplies
#pragma unroll
        for (int t = 0; t < NT; ++t) p0[t] = p1[t] = xs[t] = 0.0f;
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
              if constexpr (kAffineFormat<F>) xs[t] += xv[e];
            }
          }
        }
        float sc0 = 1.0f, sc1 = 1.0f;
        if constexpr (F == WeightFormat::kMxfp4) {
          sc0 = e8m0_to_float(s0[v]);
          sc1 = e8m0_to_float(s1[v]);
        } else if constexpr (F == WeightFormat::kFp8) {
          sc0 = f0[v >> a.w.fp8.vec_shift];
          sc1 = f1[v >> a.w.fp8.vec_shift];
        }
        if constexpr (kAffineFormat<F>) {
          // sum (s q + b) x = s (sum q x) + b (sum x)
          const float2 g0 = a0[v >> a.w.affine.vec_shift], g1 = a1[v >> a.w.affine.vec_shift];
#pragma unroll
          for (int t = 0; t < NT; ++t) {
            acc0[t] = fmaf(g0.x, p0[t], fmaf(g0.y, xs[t], acc0[t]));
            acc1[t] = fmaf(g1.x, p1[t], fmaf(g1.y, xs[t], acc1[t]));
          }
        } else {
#pragma unroll
          for (int t = 0; t < NT; ++t) {
            acc0[t] = fmaf(sc0, p0[t], acc0[t]);
            acc1[t] = fmaf(sc1, p1[t], acc1[t]);
          }
        }
      }
    }
  };
  // The first batch is already in flight. Double buffering alternates the two buffers (no register copies, which
  // would wait for the loads they copy).
  constexpr int kStep = 32 * kU;
  if constexpr (kDoubleBuffer<F, NT>) {
    for (int v0 = v_begin + lane; active && v0 < v_end;) {
      if (v0 + kStep < v_end) load_batch(rb0, rb1, v0 + kStep);
      consume(ra0, ra1, v0);
      if ((v0 += kStep) >= v_end) break;
      if (v0 + kStep < v_end) load_batch(ra0, ra1, v0 + kStep);
      consume(rb0, rb1, v0);
      v0 += kStep;
    }
  } else {
    for (int v0 = v_begin + lane; active && v0 < v_end; v0 += kStep) {
      if (v0 != v_begin + lane) load_batch(ra0, ra1, v0);
      consume(ra0, ra1, v0);
    }
  }
#pragma unroll
  for (int t = 0; t < NT; ++t) {
    acc0[t] = warp_sum(acc0[t]);
    acc1[t] = warp_sum(acc1[t]);
  }
  if constexpr (KS > 1) {
    __shared__ float partial[kWarpsPerBlock][2][NT];
    if (lane == 0) {
#pragma unroll
      for (int t = 0; t < NT; ++t) partial[warp][0][t] = acc0[t], partial[warp][1][t] = acc1[t];
    }
    __syncthreads();
    if (part != 0) return;
#pragma unroll
    for (int t = 0; t < NT; ++t) {
#pragma unroll
      for (int p = 1; p < KS; ++p) acc0[t] += partial[warp + p][0][t], acc1[t] += partial[warp + p][1][t];
    }
  }
  if (lane == 0 && active) {
    const float b0 = group_bias(a.w, group, row0), b1 = two_tables ? 0.0f : group_bias(a.w, group, row1);
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      if (t >= count) break;
      float* out = a.out + (first_row + t) * a.out_stride;
      if (pair) {
        out[o0] = pair_activation(a.pair_act, acc0[t] + b0, acc1[t] + b1, a.swiglu_alpha, a.swiglu_limit);
      } else if (gated) {
        out[o0] = silu_times(acc0[t] + b0, acc1[t] + b1);
      } else {
        out[o0] = acc0[t] + b0;
        if (has1) out[row1] = acc1[t] + b1;
      }
    }
  }
}

// Blocks of gemv_kernel<F, NT, KS> resident on the device at once (all SMs), measured once.
template <WeightFormat F, int NT, int KS>
int64_t resident_blocks() {
  static const int64_t blocks = [] {
    int device = 0, sms = 0, per_sm = 0;
    RS_CUDA_CHECK(cudaGetDevice(&device));
    RS_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    RS_CUDA_CHECK(
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, gemv_kernel<F, NT, KS>, kWarpsPerBlock * 32, 0));
    return static_cast<int64_t>(sms) * std::max(per_sm, 1);
  }();
  return blocks;
}

template <WeightFormat F, int NT, int KS>
void launch_split(const LinearArgs& a, int64_t units, unsigned chunks, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(ceil_div(units, kWarpsPerBlock / KS)), chunks);
  launch_kernel(gemv_kernel<F, NT, KS>, grid, kWarpsPerBlock * 32, 0, stream, a);
}

// Batch-1/2 rows of dense layers split K when one K-slice per warp leaves the SMs under-filled: the largest split whose
// blocks still fit one wave, with at least one full batch of loads per warp.
template <WeightFormat F, int NT>
void launch_rows(const LinearArgs& a, unsigned chunks, cudaStream_t stream) {
  const bool gated = a.glu_offset > 0 || a.pair_act != PairActivation::kNone;
  const int64_t units = gated ? a.out_features : ceil_div(a.out_features, kRowsPerWarp);
  if constexpr (NT <= 2 && F != WeightFormat::kMxfp4) {
    // kInt4Tiled: each K-slice must start on a tile (32 vectors), so that vector v sits in lane v % 32.
    const auto tiles_split = [&](int64_t ks) {
      return F != WeightFormat::kInt4Tiled || (a.in_features / WeightTraits<F>::kPerVec) % (32 * ks) == 0;
    };
    // batch: 128 vectors per row (the split rule predates double buffering; small models keep their K split). FP8
    // and int8 rows hold twice bf16's elements per vector, int4 four times: fewer vectors per row, split at the same
    // row width.
    const int64_t vecs = a.in_features / WeightTraits<F>::kPerVec,
                  batch = F == WeightFormat::kFp8 || F == WeightFormat::kInt8 ? 64
                          : kWideVector<F>                                    ? 32
                                                                              : 128;
    const int64_t wave = resident_blocks<F, NT, 2>();
    if (ceil_div(units, kWarpsPerBlock / 4) * chunks <= wave && vecs >= 4 * batch && tiles_split(4))
      return launch_split<F, NT, 4>(a, units, chunks, stream);
    if (ceil_div(units, kWarpsPerBlock / 2) * chunks <= wave && vecs >= 2 * batch && tiles_split(2))
      return launch_split<F, NT, 2>(a, units, chunks, stream);
  }
  launch_split<F, NT, 1>(a, units, chunks, stream);
}

template <WeightFormat F>
void launch_for_format(const LinearArgs& a, int32_t rows_per_chunk, cudaStream_t stream) {
  const auto chunks =
      static_cast<unsigned>(a.rows.list ? a.rows.max_chunks : ceil_div(a.rows.total_rows, a.rows.chunk_rows));
  if (rows_per_chunk <= 1) {
    launch_rows<F, 1>(a, chunks, stream);
  } else if (rows_per_chunk <= 2) {
    launch_rows<F, 2>(a, chunks, stream);
  } else if (rows_per_chunk <= 4) {
    launch_rows<F, 4>(a, chunks, stream);
  } else {
    launch_rows<F, 8>(a, chunks, stream);
  }
}

int elements_per_vector(WeightFormat format) {
  switch (format) {
    case WeightFormat::kF32: return WeightTraits<WeightFormat::kF32>::kPerVec;
    case WeightFormat::kMxfp4: return WeightTraits<WeightFormat::kMxfp4>::kPerVec;
    case WeightFormat::kFp8: return WeightTraits<WeightFormat::kFp8>::kPerVec;
    case WeightFormat::kInt4: return WeightTraits<WeightFormat::kInt4>::kPerVec;
    case WeightFormat::kInt8: return WeightTraits<WeightFormat::kInt8>::kPerVec;
    case WeightFormat::kInt4Tiled: return 1024;  // whole tiles
    default: return WeightTraits<WeightFormat::kBF16>::kPerVec;
  }
}

}  // namespace

bool gemv_supported(WeightFormat format, int64_t in_features, const float* x, int64_t x_stride, const void* weight) {
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  return in_features % elements_per_vector(format) == 0 && in_features <= INT32_MAX && x_stride % 4 == 0 &&
         aligned(x) && (weight == nullptr || aligned(weight));
}

void launch_gemv(const LinearArgs& a, int32_t rows_per_chunk, cudaStream_t stream) {
  RS_CHECK(rows_per_chunk >= 1 && rows_per_chunk <= kGemvMaxRows, "gemv chunk of {} rows", rows_per_chunk);
  if (a.out_features == 0) return;
  switch (a.format) {
    case WeightFormat::kF32: return launch_for_format<WeightFormat::kF32>(a, rows_per_chunk, stream);
    case WeightFormat::kBF16: return launch_for_format<WeightFormat::kBF16>(a, rows_per_chunk, stream);
    case WeightFormat::kF16: return launch_for_format<WeightFormat::kF16>(a, rows_per_chunk, stream);
    case WeightFormat::kMxfp4: return launch_for_format<WeightFormat::kMxfp4>(a, rows_per_chunk, stream);
    case WeightFormat::kFp8: return launch_for_format<WeightFormat::kFp8>(a, rows_per_chunk, stream);
    case WeightFormat::kInt4: return launch_for_format<WeightFormat::kInt4>(a, rows_per_chunk, stream);
    case WeightFormat::kInt8: return launch_for_format<WeightFormat::kInt8>(a, rows_per_chunk, stream);
    case WeightFormat::kInt4Tiled: return launch_for_format<WeightFormat::kInt4Tiled>(a, rows_per_chunk, stream);
  }
}

}  // namespace rs::cuda
