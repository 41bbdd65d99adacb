// MXFP4 expert GEMV lab (session 10): batch-1 decode of gpt-oss-20b's experts (hidden 2880, inter 2880, top-4), 24
// layers of distinct weights (no L2 reuse), one gate_up (gated pairs, clamped SwiGLU) and one down launch per layer,
// recorded in a CUDA graph with PDL. Variants:
//   V0: the engine's SIMT GEMV (2 rows per warp, 16-byte vectors per lane, f32 decode via fp4_e2m1_to_float).
//   VA: tensor cores, 4-byte word loads: thread (g, q) owns word q of each 32-element block for rows g and g + 8; the
//       mma's K16 steps cover one block, so the E8M0 scale applies to the f32 partial (exact for any scale).
//   VB: tensor cores, 16-byte loads: thread q owns block 4j + q; the scale is folded into the weights (bf16 HMUL2 by
//       2^(s-1): exact while s <= 128).
// Weights decode to bf16 with a bit trick (sign | e1 e0 m placed in the bf16 exponent/mantissa: value = fp4 * 2^-126).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>
#define CK(x)                                                     \
  do {                                                            \
    cudaError_t e = (x);                                          \
    if (e != cudaSuccess) {                                       \
      printf("CUDA %s at %d\n", cudaGetErrorString(e), __LINE__); \
      exit(1);                                                    \
    }                                                             \
  } while (0)

__device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __forceinline__ void pdl_go() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(~0u, v, o);
  return v;
}
__device__ __forceinline__ float fp4_e2m1_to_float(uint32_t code) {
  const uint32_t mag = code & 7u;
  const uint32_t bits = mag < 2 ? (mag ? 126u << 23 : 0u) : (((mag >> 1) + 126u) << 23) | ((mag & 1u) << 22);
  return __uint_as_float(bits | ((code & 8u) << 28));
}
__device__ __forceinline__ float e8m0_to_float(uint32_t e) {
  return e ? __uint_as_float(e << 23) : __uint_as_float(0x00400000u);
}
__device__ __forceinline__ float clamped_swiglu(float gate, float up) {
  const float alpha = 1.702f, limit = 7.0f;
  gate = fminf(gate, limit);
  up = fminf(fmaxf(up, -limit), limit);
  return (up + 1.0f) * (gate / (1.0f + expf(-alpha * gate)));
}
__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}
__device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ uint32_t hmul2(uint32_t a, uint32_t b) {
  __nv_bfloat162 x = *reinterpret_cast<__nv_bfloat162*>(&a), y = *reinterpret_cast<__nv_bfloat162*>(&b);
  __nv_bfloat162 r = __hmul2(x, y);
  return *reinterpret_cast<uint32_t*>(&r);
}
// Word of 8 MXFP4 codes (element i in nibble i) -> 4 bf16x2 pairs (3,7), (2,6), (1,5), (0,4), each = fp4 * 2^-126.
__device__ __forceinline__ void fp4x8_to_bf16x2(uint32_t q, uint32_t (&p)[4]) {
#pragma unroll
  for (int d = 0; d < 4; ++d) {
    p[d] = (q & 0x80008000u) | ((q >> 6) & 0x01C001C0u);
    q <<= 4;
  }
}

constexpr int kHidden = 2880, kInter = 2880, kExperts = 4, kLayers = 24;

struct MArgs {
  const uint8_t* const* w;  // [expert] -> rows x K/2 bytes
  const uint8_t* const* s;  // [expert] -> rows x K/32
  const float* x;           // per expert: x + e * x_estride
  int x_estride;
  float* out;  // per expert: out + e * out_estride
  int out_estride;
  int features;  // outputs (gated: pairs)
  int K;
  int gated;  // rows 2o (gate), 2o + 1 (up)
};

// ---- V0: the engine's SIMT GEMV, NT = 1 ----
__global__ void __launch_bounds__(256, 4) v0_kernel(MArgs a) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, e = blockIdx.y;
  const int unit = blockIdx.x * 8 + warp;
  const int o0 = a.gated ? unit : unit * 2;
  const bool active = o0 < a.features;
  const int r0 = a.gated ? 2 * o0 : o0, r1 = a.gated ? 2 * o0 + 1 : min(o0 + 1, a.features - 1);
  const int vecs = a.K / 32;
  const uint4* w0 = reinterpret_cast<const uint4*>(a.w[e]) + (size_t)r0 * vecs;
  const uint4* w1 = reinterpret_cast<const uint4*>(a.w[e]) + (size_t)r1 * vecs;
  const uint8_t* s0 = a.s[e] + (size_t)r0 * vecs;
  const uint8_t* s1 = a.s[e] + (size_t)r1 * vecs;
  uint4 ra0[2], ra1[2];
  const auto load = [&](int v0) {
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      const int v = v0 + 32 * u;
      if (v < vecs) ra0[u] = __ldg(w0 + v), ra1[u] = __ldg(w1 + v);
    }
  };
  if (active) load(lane);
  pdl_wait();
  pdl_go();
  const float* x = a.x + (size_t)e * a.x_estride;
  float acc0 = 0, acc1 = 0;
  for (int v0 = lane; active && v0 < vecs; v0 += 64) {
    if (v0 != lane) load(v0);
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      const int v = v0 + 32 * u;
      if (v >= vecs) break;
      const uint32_t wa[4] = {ra0[u].x, ra0[u].y, ra0[u].z, ra0[u].w}, wb[4] = {ra1[u].x, ra1[u].y, ra1[u].z, ra1[u].w};
      float p0 = 0, p1 = 0;
#pragma unroll
      for (int wi = 0; wi < 4; ++wi) {
        const float4 xa = *reinterpret_cast<const float4*>(x + v * 32 + wi * 8);
        const float4 xb = *reinterpret_cast<const float4*>(x + v * 32 + wi * 8 + 4);
        const float xv[8] = {xa.x, xa.y, xa.z, xa.w, xb.x, xb.y, xb.z, xb.w};
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          p0 = fmaf(fp4_e2m1_to_float(wa[wi] >> (4 * i)), xv[i], p0);
          p1 = fmaf(fp4_e2m1_to_float(wb[wi] >> (4 * i)), xv[i], p1);
        }
      }
      acc0 = fmaf(e8m0_to_float(s0[v]), p0, acc0);
      acc1 = fmaf(e8m0_to_float(s1[v]), p1, acc1);
    }
  }
  acc0 = warp_sum(acc0);
  acc1 = warp_sum(acc1);
  if (lane == 0 && active) {
    float* out = a.out + (size_t)e * a.out_estride;
    if (a.gated) {
      out[o0] = clamped_swiglu(acc0, acc1);
    } else {
      out[o0] = acc0;
      if (o0 + 1 < a.features) out[o0 + 1] = acc1;
    }
  }
}

// Shared: x (one token) -> shared bf16, per 32-block: 4 words x 4 pairs in decode order ((3,7), (2,6), (1,5), (0,4)).
__device__ __forceinline__ void stage_x(const float* x, int K, uint32_t* xs) {
  for (int i = threadIdx.x; i < K / 8; i += blockDim.x) {
    const float4 lo = *reinterpret_cast<const float4*>(x + 8 * i), hi = *reinterpret_cast<const float4*>(x + 8 * i + 4);
    uint4 v;
    v.x = pack_bf16x2(lo.w, hi.w);
    v.y = pack_bf16x2(lo.z, hi.z);
    v.z = pack_bf16x2(lo.y, hi.y);
    v.w = pack_bf16x2(lo.x, hi.x);
    reinterpret_cast<uint4*>(xs)[i] = v;
  }
}

// Weight row of mma row i (0..15) of the warp's row group: gated: i < 8 gate of feature fb + i, else its up row.
__device__ __forceinline__ int mma_row(const MArgs& a, int fb, int i) {
  if (a.gated) {
    const int f = min(fb + (i & 7), a.features - 1);
    return 2 * f + (i >> 3);
  }
  return min(fb + i, a.features - 1);
}

template <int KS>
__device__ __forceinline__ void epilogue(const MArgs& a, float (&acc)[4], int fb, float* red) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, part = warp % KS, g = lane / 4, q = lane % 4;
  if constexpr (KS > 1) {
    // red: [warp][lane][4]
    reinterpret_cast<float4*>(red)[warp * 32 + lane] = make_float4(acc[0], acc[1], acc[2], acc[3]);
    __syncthreads();
    if (part != 0) return;
#pragma unroll
    for (int p = 1; p < KS; ++p) {
      const float4 v = reinterpret_cast<float4*>(red)[(warp + p) * 32 + lane];
      acc[0] += v.x, acc[1] += v.y, acc[2] += v.z, acc[3] += v.w;
    }
  }
  if (q != 0) return;  // token 0 lives in column 0: c0 (row g), c2 (row g + 8)
  float* out = a.out + (size_t)blockIdx.y * a.out_estride;
  if (a.gated) {
    if (fb + g < a.features) out[fb + g] = clamped_swiglu(acc[0], acc[2]);
  } else {
    if (fb + g < a.features) out[fb + g] = acc[0];
    if (fb + g + 8 < a.features) out[fb + g + 8] = acc[2];
  }
}

// ---- VA: word loads, per-block f32 scaling ----
template <int KS, int U>
__global__ void __launch_bounds__(256) va_kernel(MArgs a) {
  extern __shared__ __align__(16) uint32_t xs[];  // K / 2 words, then the KS reduction
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, part = warp % KS, g = lane / 4, q = lane % 4;
  const int e = blockIdx.y, rg = blockIdx.x * (8 / KS) + warp / KS;
  const int fb = rg * (a.gated ? 8 : 16);
  const int nblk = a.K / 32, rb = a.K / 2;
  const int rowA = mma_row(a, fb, g), rowB = mma_row(a, fb, g + 8);
  const uint8_t* wA = a.w[e] + (size_t)rowA * rb + 4 * q;
  const uint8_t* wB = a.w[e] + (size_t)rowB * rb + 4 * q;
  const uint8_t* sA = a.s[e] + (size_t)rowA * nblk;
  const uint8_t* sB = a.s[e] + (size_t)rowB * nblk;
  const int slice = (nblk + KS - 1) / KS, b0 = part * slice, b1 = min(nblk, b0 + slice);
  pdl_wait();
  pdl_go();
  stage_x(a.x + (size_t)e * a.x_estride, a.K, xs);
  __syncthreads();
  float acc[4] = {0, 0, 0, 0};
  const uint32_t k2p126 = 0x7E807E80u;  // bf16x2 2^126
  for (int b = b0; b < b1; b += U) {
    uint32_t wa[U], wb[U];
    uint8_t sa[U], sb[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (b + u < b1) {
        wa[u] = __ldg(reinterpret_cast<const uint32_t*>(wA + 16 * (b + u)));
        wb[u] = __ldg(reinterpret_cast<const uint32_t*>(wB + 16 * (b + u)));
        sa[u] = __ldg(sA + b + u);
        sb[u] = __ldg(sB + b + u);
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (b + u >= b1) break;
      uint32_t pa[4], pb[4];
      fp4x8_to_bf16x2(wa[u], pa);
      fp4x8_to_bf16x2(wb[u], pb);
#pragma unroll
      for (int d = 0; d < 4; ++d) pa[d] = hmul2(pa[d], k2p126), pb[d] = hmul2(pb[d], k2p126);
      uint4 xv = make_uint4(0, 0, 0, 0);
      if (g == 0) xv = reinterpret_cast<const uint4*>(xs)[(b + u) * 4 + q];
      float c[4] = {0, 0, 0, 0};
      const uint32_t a0[4] = {pa[0], pb[0], pa[1], pb[1]}, a1[4] = {pa[2], pb[2], pa[3], pb[3]};
      mma_bf16(c, a0, xv.x, xv.y);
      mma_bf16(c, a1, xv.z, xv.w);
      const float fa = e8m0_to_float(sa[u]), fbs = e8m0_to_float(sb[u]);
      acc[0] = fmaf(c[0], fa, acc[0]);
      acc[1] = fmaf(c[1], fa, acc[1]);
      acc[2] = fmaf(c[2], fbs, acc[2]);
      acc[3] = fmaf(c[3], fbs, acc[3]);
    }
  }
  epilogue<KS>(a, acc, fb, reinterpret_cast<float*>(xs + a.K / 2));
}

// ---- VB: 16-byte loads, scale folded into the weights (bf16 2^(s-1)) ----
template <int KS, int U, int MODE = 0>
__global__ void __launch_bounds__(256) vb_kernel(MArgs a) {
  extern __shared__ __align__(16) uint32_t xs[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, part = warp % KS, g = lane / 4, q = lane % 4;
  const int e = blockIdx.y, rg = blockIdx.x * (8 / KS) + warp / KS;
  const int fb = rg * (a.gated ? 8 : 16);
  const int nblk = a.K / 32, rb = a.K / 2;
  const int rowA = mma_row(a, fb, g), rowB = mma_row(a, fb, g + 8);
  const uint4* wA = reinterpret_cast<const uint4*>(a.w[e] + (size_t)rowA * rb);
  const uint4* wB = reinterpret_cast<const uint4*>(a.w[e] + (size_t)rowB * rb);
  const uint8_t* sA = a.s[e] + (size_t)rowA * nblk;
  const uint8_t* sB = a.s[e] + (size_t)rowB * nblk;
  const int groups = (nblk + 3) / 4;
  const int slice = (groups + KS - 1) / KS, j0 = part * slice, j1 = min(groups, j0 + slice);
  pdl_wait();
  pdl_go();
  if (!(MODE & 2)) {
    stage_x(a.x + (size_t)e * a.x_estride, a.K, xs);
    __syncthreads();
  }
  float acc[4] = {0, 0, 0, 0};
  for (int j = j0; j < j1; j += U) {
    uint4 wa[U], wb[U];
    uint32_t fa[U], fbs[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int blk = 4 * (j + u) + q;
      wa[u] = wb[u] = make_uint4(0, 0, 0, 0);
      fa[u] = fbs[u] = 0;
      if (j + u < j1 && blk < nblk) {
        wa[u] = __ldg(wA + blk);
        wb[u] = __ldg(wB + blk);
        fa[u] = __ldg(sA + blk);
        fbs[u] = __ldg(sB + blk);
      }
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (j + u >= j1) break;
      const int blk = 4 * (j + u) + q;
      const uint32_t sfa = ((fa[u] + 126u) << 7) * 0x10001u, sfb = ((fbs[u] + 126u) << 7) * 0x10001u;
      const uint32_t wwa[4] = {wa[u].x, wa[u].y, wa[u].z, wa[u].w}, wwb[4] = {wb[u].x, wb[u].y, wb[u].z, wb[u].w};
#pragma unroll
      for (int w = 0; w < 4; ++w) {
        uint32_t pa[4], pb[4];
        if (MODE & 1) {
#pragma unroll
          for (int d = 0; d < 4; ++d) pa[d] = wwa[w] >> (4 * d), pb[d] = wwb[w] >> (4 * d);
        } else {
          fp4x8_to_bf16x2(wwa[w], pa);
          fp4x8_to_bf16x2(wwb[w], pb);
        }
        if (!(MODE & 4)) {
#pragma unroll
          for (int d = 0; d < 4; ++d) pa[d] = hmul2(pa[d], sfa), pb[d] = hmul2(pb[d], sfb);
        }
        uint4 xv = make_uint4(0, 0, 0, 0);
        if (g == 0 && blk < nblk) xv = reinterpret_cast<const uint4*>(xs)[blk * 4 + w];
        const uint32_t a0[4] = {pa[0], pb[0], pa[1], pb[1]}, a1[4] = {pa[2], pb[2], pa[3], pb[3]};
        mma_bf16(acc, a0, xv.x, xv.y);
        mma_bf16(acc, a1, xv.z, xv.w);
      }
    }
  }
  epilogue<KS>(a, acc, fb, reinterpret_cast<float*>(xs + a.K / 2));
}

// ---- VC: VB + the first weight loads issued before x is staged, double-buffered groups, RT 16-row tiles per warp ----
template <int KS, int RT>
__global__ void __launch_bounds__(256) vc_kernel(MArgs a) {
  extern __shared__ __align__(16) uint32_t xs[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, part = warp % KS, g = lane / 4, q = lane % 4;
  const int e = blockIdx.y, rg = blockIdx.x * (8 / KS) + warp / KS;
  const int per_tile = a.gated ? 8 : 16;
  const int fb = rg * RT * per_tile;
  const int nblk = a.K / 32, rb = a.K / 2;
  const uint4* wA[RT];
  const uint4* wB[RT];
  const uint8_t* sA[RT];
  const uint8_t* sB[RT];
  const int groups = (nblk + 3) / 4;
  const int slice = (groups + KS - 1) / KS, j0 = part * slice, j1 = min(groups, j0 + slice);
  pdl_wait();
  pdl_go();
#pragma unroll
  for (int t = 0; t < RT; ++t) {
    const int rowA = mma_row(a, fb + t * per_tile, g), rowB = mma_row(a, fb + t * per_tile, g + 8);
    wA[t] = reinterpret_cast<const uint4*>(a.w[e] + (size_t)rowA * rb);
    wB[t] = reinterpret_cast<const uint4*>(a.w[e] + (size_t)rowB * rb);
    sA[t] = a.s[e] + (size_t)rowA * nblk;
    sB[t] = a.s[e] + (size_t)rowB * nblk;
  }
  uint4 wa[2][RT], wb[2][RT];
  uint32_t fa[2][RT], fbs[2][RT];
  const auto load = [&](int buf, int j) {
    const int blk = 4 * j + q;
#pragma unroll
    for (int t = 0; t < RT; ++t) {
      wa[buf][t] = wb[buf][t] = make_uint4(0, 0, 0, 0);
      fa[buf][t] = fbs[buf][t] = 0;
      if (j < j1 && blk < nblk) {
        wa[buf][t] = __ldg(wA[t] + blk);
        wb[buf][t] = __ldg(wB[t] + blk);
        fa[buf][t] = __ldg(sA[t] + blk);
        fbs[buf][t] = __ldg(sB[t] + blk);
      }
    }
  };
  load(0, j0);
  stage_x(a.x + (size_t)e * a.x_estride, a.K, xs);
  __syncthreads();
  float acc[RT][4];
#pragma unroll
  for (int t = 0; t < RT; ++t) acc[t][0] = acc[t][1] = acc[t][2] = acc[t][3] = 0;
  const auto compute = [&](int buf, int j) {
    const int blk = 4 * j + q;
    uint4 xv[4];
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      xv[w] = make_uint4(0, 0, 0, 0);
      if (g == 0 && blk < nblk) xv[w] = reinterpret_cast<const uint4*>(xs)[blk * 4 + w];
    }
#pragma unroll
    for (int t = 0; t < RT; ++t) {
      const uint32_t sfa = ((fa[buf][t] + 126u) << 7) * 0x10001u, sfb = ((fbs[buf][t] + 126u) << 7) * 0x10001u;
      const uint32_t wwa[4] = {wa[buf][t].x, wa[buf][t].y, wa[buf][t].z, wa[buf][t].w};
      const uint32_t wwb[4] = {wb[buf][t].x, wb[buf][t].y, wb[buf][t].z, wb[buf][t].w};
#pragma unroll
      for (int w = 0; w < 4; ++w) {
        uint32_t pa[4], pb[4];
        fp4x8_to_bf16x2(wwa[w], pa);
        fp4x8_to_bf16x2(wwb[w], pb);
#pragma unroll
        for (int d = 0; d < 4; ++d) pa[d] = hmul2(pa[d], sfa), pb[d] = hmul2(pb[d], sfb);
        const uint32_t a0[4] = {pa[0], pb[0], pa[1], pb[1]}, a1[4] = {pa[2], pb[2], pa[3], pb[3]};
        mma_bf16(acc[t], a0, xv[w].x, xv[w].y);
        mma_bf16(acc[t], a1, xv[w].z, xv[w].w);
      }
    }
  };
  for (int j = j0; j < j1; j += 2) {
    load(1, j + 1);
    compute(0, j);
    if (j + 1 >= j1) break;
    load(0, j + 2);
    compute(1, j + 1);
  }
#pragma unroll
  for (int t = 0; t < RT; ++t) {
    __syncthreads();
    epilogue<KS>(a, acc[t], fb + t * per_tile, reinterpret_cast<float*>(xs + a.K / 2));
  }
}

// ---- VD / VE: VB without shared memory: each warp reads its own K slice of x (VD: f32, converted in registers;
// VE: bf16 already in the decode order, 64 bytes per 32-block) ----
template <int KS, bool BF16X>
__global__ void __launch_bounds__(256) vd_kernel(MArgs a, const uint4* xb) {
  __shared__ __align__(16) float red[KS > 1 ? 8 * 32 * 4 : 4];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, part = warp % KS, g = lane / 4, q = lane % 4;
  const int e = blockIdx.y, rg = blockIdx.x * (8 / KS) + warp / KS;
  const int fb = rg * (a.gated ? 8 : 16);
  const int nblk = a.K / 32, rb = a.K / 2;
  const int rowA = mma_row(a, fb, g), rowB = mma_row(a, fb, g + 8);
  const uint4* wA = reinterpret_cast<const uint4*>(a.w[e] + (size_t)rowA * rb);
  const uint4* wB = reinterpret_cast<const uint4*>(a.w[e] + (size_t)rowB * rb);
  const uint8_t* sA = a.s[e] + (size_t)rowA * nblk;
  const uint8_t* sB = a.s[e] + (size_t)rowB * nblk;
  const int groups = (nblk + 3) / 4;
  const int slice = (groups + KS - 1) / KS, j0 = part * slice, j1 = min(groups, j0 + slice);
  pdl_wait();
  pdl_go();
  const float* x = a.x + (size_t)e * a.x_estride;
  const uint4* xbe = xb + (size_t)e * (a.x_estride / 8);
  float acc[4] = {0, 0, 0, 0};
  for (int j = j0; j < j1; ++j) {
    const int blk = 4 * j + q;
    uint4 wa = make_uint4(0, 0, 0, 0), wb = wa;
    uint32_t fa = 0, fbs = 0;
    uint4 xv[4];
    for (int w = 0; w < 4; ++w) xv[w] = make_uint4(0, 0, 0, 0);
    if (blk < nblk) {
      wa = __ldg(wA + blk);
      wb = __ldg(wB + blk);
      fa = __ldg(sA + blk);
      fbs = __ldg(sB + blk);
      if (g == 0) {
        if constexpr (BF16X) {
#pragma unroll
          for (int w = 0; w < 4; ++w) xv[w] = xbe[blk * 4 + w];
        } else {
#pragma unroll
          for (int w = 0; w < 4; ++w) {
            const float4 lo = *reinterpret_cast<const float4*>(x + 32 * blk + 8 * w);
            const float4 hi = *reinterpret_cast<const float4*>(x + 32 * blk + 8 * w + 4);
            xv[w] = make_uint4(pack_bf16x2(lo.w, hi.w), pack_bf16x2(lo.z, hi.z), pack_bf16x2(lo.y, hi.y),
                               pack_bf16x2(lo.x, hi.x));
          }
        }
      }
    }
    const uint32_t sfa = ((fa + 126u) << 7) * 0x10001u, sfb = ((fbs + 126u) << 7) * 0x10001u;
    const uint32_t wwa[4] = {wa.x, wa.y, wa.z, wa.w}, wwb[4] = {wb.x, wb.y, wb.z, wb.w};
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      uint32_t pa[4], pb[4];
      fp4x8_to_bf16x2(wwa[w], pa);
      fp4x8_to_bf16x2(wwb[w], pb);
#pragma unroll
      for (int d = 0; d < 4; ++d) pa[d] = hmul2(pa[d], sfa), pb[d] = hmul2(pb[d], sfb);
      const uint32_t a0[4] = {pa[0], pb[0], pa[1], pb[1]}, a1[4] = {pa[2], pb[2], pa[3], pb[3]};
      mma_bf16(acc, a0, xv[w].x, xv[w].y);
      mma_bf16(acc, a1, xv[w].z, xv[w].w);
    }
  }
  epilogue<KS>(a, acc, fb, red);
}
__global__ void to_bf16_perm(const float* x, int n, uint4* xb) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n / 8; i += gridDim.x * blockDim.x) {
    const float4 lo = *reinterpret_cast<const float4*>(x + 8 * i), hi = *reinterpret_cast<const float4*>(x + 8 * i + 4);
    xb[i] =
        make_uint4(pack_bf16x2(lo.w, hi.w), pack_bf16x2(lo.z, hi.z), pack_bf16x2(lo.y, hi.y), pack_bf16x2(lo.x, hi.x));
  }
}
uint4* g_xb = nullptr;

// ---- reference: f32 dot of decoded weights with x (optionally rounded to bf16) ----
__global__ void ref_kernel(MArgs a, int round_x) {
  const int e = blockIdx.y, o = blockIdx.x * blockDim.x + threadIdx.x;
  if (o >= a.features) return;
  const float* x = a.x + (size_t)e * a.x_estride;
  const int nblk = a.K / 32;
  float r[2];
  for (int h = 0; h < (a.gated ? 2 : 1); ++h) {
    const int row = a.gated ? 2 * o + h : o;
    double acc = 0;
    for (int b = 0; b < nblk; ++b) {
      const float sc = e8m0_to_float(a.s[e][(size_t)row * nblk + b]);
      for (int i = 0; i < 32; ++i) {
        const uint8_t byte = a.w[e][(size_t)row * (a.K / 2) + 16 * b + i / 2];
        const float wv = fp4_e2m1_to_float(i % 2 ? byte >> 4 : byte & 15) * sc;
        float xv = x[32 * b + i];
        if (round_x) xv = __bfloat162float(__float2bfloat16_rn(xv));
        acc += (double)wv * xv;
      }
    }
    r[h] = (float)acc;
  }
  float* out = a.out + (size_t)e * a.out_estride;
  out[o] = a.gated ? clamped_swiglu(r[0], r[1]) : r[0];
}

__global__ void fill_bytes(uint8_t* p, size_t n, uint32_t seed, int scale_mode) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    uint32_t h = (uint32_t)i * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    p[i] = scale_mode ? (uint8_t)(118 + h % 9) : (uint8_t)(h >> 8);
  }
}
__global__ void fill_x(float* x, int n, uint32_t seed) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    uint32_t h = (uint32_t)i * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    x[i] = ((h % 20001) / 10000.0f - 1.0f) * 2.0f;
  }
}

struct Layer {
  uint8_t** gu_w;
  uint8_t** gu_s;
  uint8_t** dn_w;
  uint8_t** dn_s;
};

using Launch = std::function<void(const MArgs&, cudaStream_t)>;

template <typename K>
void launch(K kernel, dim3 grid, size_t smem, cudaStream_t s, const MArgs& a) {
  cudaLaunchAttribute at{};
  at.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  at.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t c{};
  c.gridDim = grid;
  c.blockDim = 256;
  c.dynamicSmemBytes = smem;
  c.stream = s;
  c.attrs = &at;
  c.numAttrs = 1;
  CK(cudaLaunchKernelEx(&c, kernel, a));
}

Launch v0() {
  return [](const MArgs& a, cudaStream_t s) {
    const int units = a.gated ? a.features : (a.features + 1) / 2;
    launch(v0_kernel, dim3((units + 7) / 8, kExperts), 0, s, a);
  };
}
template <int KS, int U>
Launch va() {
  return [](const MArgs& a, cudaStream_t s) {
    const int per_rg = a.gated ? 8 : 16, rgs = (a.features + per_rg - 1) / per_rg;
    const size_t smem = a.K * 2 + (KS > 1 ? 8 * 32 * 16 : 0);
    launch(va_kernel<KS, U>, dim3((rgs + 8 / KS - 1) / (8 / KS), kExperts), smem, s, a);
  };
}
template <int KS, int U, int MODE = 0>
Launch vb() {
  return [](const MArgs& a, cudaStream_t s) {
    const int per_rg = a.gated ? 8 : 16, rgs = (a.features + per_rg - 1) / per_rg;
    const size_t smem = a.K * 2 + (KS > 1 ? 8 * 32 * 16 : 0);
    launch(vb_kernel<KS, U, MODE>, dim3((rgs + 8 / KS - 1) / (8 / KS), kExperts), smem, s, a);
  };
}

template <int KS, int RT>
Launch vc() {
  return [](const MArgs& a, cudaStream_t s) {
    const int per_rg = (a.gated ? 8 : 16) * RT, rgs = (a.features + per_rg - 1) / per_rg;
    const size_t smem = a.K * 2 + (KS > 1 ? 8 * 32 * 16 : 0);
    launch(vc_kernel<KS, RT>, dim3((rgs + 8 / KS - 1) / (8 / KS), kExperts), smem, s, a);
  };
}

template <int KS, bool BF16X>
Launch vd() {
  return [](const MArgs& a, cudaStream_t s) {
    const int per_rg = a.gated ? 8 : 16, rgs = (a.features + per_rg - 1) / per_rg;
    if (BF16X) to_bf16_perm<<<16, 256, 0, s>>>(a.x, a.x_estride ? kExperts * a.x_estride : a.K, g_xb);
    cudaLaunchAttribute at{};
    at.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at.val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t c{};
    c.gridDim = dim3((rgs + 8 / KS - 1) / (8 / KS), kExperts);
    c.blockDim = 256;
    c.stream = s;
    c.attrs = &at;
    c.numAttrs = 1;
    CK(cudaLaunchKernelEx(&c, vd_kernel<KS, BF16X>, a, (const uint4*)g_xb));
  };
}

int main() {
  int sms;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const size_t gu_rows = 2 * kInter, dn_rows = kHidden;
  const size_t gu_w = gu_rows * kHidden / 2, gu_s = gu_rows * kHidden / 32, dn_w = dn_rows * kInter / 2,
               dn_s = dn_rows * kInter / 32;
  std::vector<Layer> layers(kLayers);
  size_t total = 0;
  uint32_t seed = 1;
  auto alloc = [&](size_t n, int scale) {
    uint8_t* p;
    CK(cudaMalloc(&p, n));
    fill_bytes<<<1024, 256>>>(p, n, seed++, scale);
    total += n;
    return p;
  };
  for (auto& L : layers) {
    uint8_t* h[4][kExperts];
    for (int e = 0; e < kExperts; ++e) {
      h[0][e] = alloc(gu_w, 0), h[1][e] = alloc(gu_s, 1), h[2][e] = alloc(dn_w, 0), h[3][e] = alloc(dn_s, 1);
    }
    uint8_t*** dst[4] = {&L.gu_w, &L.gu_s, &L.dn_w, &L.dn_s};
    for (int t = 0; t < 4; ++t) {
      CK(cudaMalloc(dst[t], sizeof(uint8_t*) * kExperts));
      CK(cudaMemcpy(*dst[t], h[t], sizeof(uint8_t*) * kExperts, cudaMemcpyHostToDevice));
    }
  }
  float *x, *act, *out, *ref_act, *ref_out;
  CK(cudaMalloc(&x, kHidden * 4));
  CK(cudaMalloc(&act, kExperts * kInter * 4));
  CK(cudaMalloc(&out, kExperts * kHidden * 4));
  CK(cudaMalloc(&ref_act, kExperts * kInter * 4));
  CK(cudaMalloc(&ref_out, kExperts * kHidden * 4));
  fill_x<<<16, 256>>>(x, kHidden, 99);
  CK(cudaMalloc(&g_xb, kExperts * kInter * 2));
  CK(cudaDeviceSynchronize());
  printf("expert bytes read per step %.3f GB over %d layers, %d SMs\n", total / 1e9, kLayers, sms);

  auto up_args = [&](const Layer& L, float* o) { return MArgs{L.gu_w, L.gu_s, x, 0, o, kInter, kInter, kHidden, 1}; };
  auto dn_args = [&](const Layer& L, const float* in, float* o) {
    return MArgs{L.dn_w, L.dn_s, in, kInter, o, kHidden, kHidden, kInter, 0};
  };
  cudaStream_t st;
  CK(cudaStreamCreate(&st));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));

  struct Variant {
    std::string name;
    Launch up, down;
    int round_x;
  };
  std::vector<Variant> vs = {
      {"V0 engine SIMT", v0(), v0(), 0},
      {"VB KS8 U1", vb<8, 1>(), vb<8, 1>(), 1},
      {"VD KS8", vd<8, false>(), vd<8, false>(), 1},
      {"VD KS4", vd<4, false>(), vd<4, false>(), 1},
      {"VD KS2", vd<2, false>(), vd<2, false>(), 1},
      {"VE KS8 (+convert launch)", vd<8, true>(), vd<8, true>(), 1},
      {"VE KS4 (+convert launch)", vd<4, true>(), vd<4, true>(), 1},
  };
  for (auto& v : vs) {
    // correctness on layer 0 (up, then down on the reference act)
    const Layer& L0 = layers[0];
    v.up(up_args(L0, act), st);
    ref_kernel<<<dim3((kInter + 127) / 128, kExperts), 128, 0, st>>>(up_args(L0, ref_act), v.round_x);
    v.down(dn_args(L0, ref_act, out), st);
    ref_kernel<<<dim3((kHidden + 127) / 128, kExperts), 128, 0, st>>>(dn_args(L0, ref_act, ref_out), v.round_x);
    CK(cudaStreamSynchronize(st));
    std::vector<float> h1(kExperts * kInter), h2(kExperts * kInter), h3(kExperts * kHidden), h4(kExperts * kHidden);
    CK(cudaMemcpy(h1.data(), act, h1.size() * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(h2.data(), ref_act, h2.size() * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(h3.data(), out, h3.size() * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(h4.data(), ref_out, h4.size() * 4, cudaMemcpyDeviceToHost));
    auto err = [](const std::vector<float>& a, const std::vector<float>& b) {
      double md = 0, mr = 0;
      for (size_t i = 0; i < a.size(); ++i) md = fmax(md, fabs(a[i] - b[i])), mr = fmax(mr, fabs(b[i]));
      return md / mr;
    };
    const double eu = err(h1, h2), ed = err(h3, h4);
    // timing: graph of all layers, replayed
    cudaGraph_t graph;
    CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
    for (const Layer& L : layers) {
      v.up(up_args(L, act), st);
      v.down(dn_args(L, act, out), st);
    }
    CK(cudaStreamEndCapture(st, &graph));
    cudaGraphExec_t exec;
    CK(cudaGraphInstantiate(&exec, graph, 0));
    for (int i = 0; i < 3; ++i) CK(cudaGraphLaunch(exec, st));
    const int reps = 20;
    CK(cudaEventRecord(e0, st));
    for (int i = 0; i < reps; ++i) CK(cudaGraphLaunch(exec, st));
    CK(cudaEventRecord(e1, st));
    CK(cudaEventSynchronize(e1));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    const double us = ms * 1000 / reps;
    // per-launch split: up only, down only
    double part_us[2];
    for (int which = 0; which < 2; ++which) {
      cudaGraph_t g2;
      CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
      for (const Layer& L : layers) {
        if (which == 0)
          v.up(up_args(L, act), st);
        else
          v.down(dn_args(L, act, out), st);
      }
      CK(cudaStreamEndCapture(st, &g2));
      cudaGraphExec_t x2;
      CK(cudaGraphInstantiate(&x2, g2, 0));
      for (int i = 0; i < 3; ++i) CK(cudaGraphLaunch(x2, st));
      CK(cudaEventRecord(e0, st));
      for (int i = 0; i < reps; ++i) CK(cudaGraphLaunch(x2, st));
      CK(cudaEventRecord(e1, st));
      CK(cudaEventSynchronize(e1));
      float m2;
      CK(cudaEventElapsedTime(&m2, e0, e1));
      part_us[which] = m2 * 1000 / reps / kLayers;
      CK(cudaGraphExecDestroy(x2));
      CK(cudaGraphDestroy(g2));
    }
    printf(
        "%-30s step %7.1f us (%.2f TB/s) | up %6.1f us (%.2f TB/s) down %6.1f us (%.2f TB/s) | err up %.2e down %.2e\n",
        v.name.c_str(), us, total / (us * 1e-6) / 1e12, part_us[0],
        kExperts * (gu_w + gu_s) / (part_us[0] * 1e-6) / 1e12, part_us[1],
        kExperts * (dn_w + dn_s) / (part_us[1] * 1e-6) / 1e12, eu, ed);
    CK(cudaGraphExecDestroy(exec));
    CK(cudaGraphDestroy(graph));
  }
  // bf16 subnormal check: every code, HMUL2 by 2^126 and by 2^(s-1), through one mma
  return 0;
}
