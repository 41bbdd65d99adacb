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

// bf16 expert GEMV lab: Qwen3-30B-A3B batch-1 decode (hidden 2048, moe inter 768, 8 active experts, 48 layers).
constexpr int kHidden = 2048, kInter = 768, kExperts = 8, kLayers = 48;

struct BArgs {
  const uint16_t* const* w;  // [expert] -> rows x K bf16
  const float* x;
  int x_estride;
  float* out;
  int out_estride;
  int features;
  int K;
  int gated;  // rows 2o, 2o + 1
};

__device__ __forceinline__ float silu_times(float g, float u) { return g / (1.0f + expf(-g)) * u; }

// S: the engine's SIMT GEMV shape: a warp = one gated feature (2 rows) or 2 plain rows; 2 vectors per lane per batch,
// double-buffered; KS warps split K.
template <int KS>
__global__ void __launch_bounds__(256) s_kernel(BArgs a) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, part = warp % KS, e = blockIdx.y;
  const int unit = blockIdx.x * (8 / KS) + warp / KS;
  const int o0 = a.gated ? unit : unit * 2;
  const bool active = o0 < a.features;
  const int r0 = a.gated ? 2 * o0 : o0, r1 = a.gated ? 2 * o0 + 1 : min(o0 + 1, a.features - 1);
  const int vecs = a.K / 8, slice = (vecs + KS - 1) / KS, vb = part * slice, ve = min(vecs, vb + slice);
  const uint4* w0 = reinterpret_cast<const uint4*>(a.w[e]) + (size_t)r0 * vecs;
  const uint4* w1 = reinterpret_cast<const uint4*>(a.w[e]) + (size_t)r1 * vecs;
  const float* x = a.x + (size_t)e * a.x_estride;
  uint4 A0[2], A1[2], B0[2], B1[2];
  auto load = [&](uint4* d0, uint4* d1, int v0) {
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      const int v = v0 + 32 * u;
      if (v < ve) d0[u] = __ldg(w0 + v), d1[u] = __ldg(w1 + v);
    }
  };
  float acc0 = 0, acc1 = 0;
  auto comp = [&](const uint4* d0, const uint4* d1, int v0) {
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      const int v = v0 + 32 * u;
      if (v >= ve) break;
      const float4 xa = *reinterpret_cast<const float4*>(x + v * 8),
                   xb = *reinterpret_cast<const float4*>(x + v * 8 + 4);
      const float xs[8] = {xa.x, xa.y, xa.z, xa.w, xb.x, xb.y, xb.z, xb.w};
      const uint32_t p[4] = {d0[u].x, d0[u].y, d0[u].z, d0[u].w}, r[4] = {d1[u].x, d1[u].y, d1[u].z, d1[u].w};
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        acc0 = fmaf(__uint_as_float(p[i] << 16), xs[2 * i], acc0);
        acc0 = fmaf(__uint_as_float(p[i] & 0xffff0000u), xs[2 * i + 1], acc0);
        acc1 = fmaf(__uint_as_float(r[i] << 16), xs[2 * i], acc1);
        acc1 = fmaf(__uint_as_float(r[i] & 0xffff0000u), xs[2 * i + 1], acc1);
      }
    }
  };
  pdl_wait();
  pdl_go();
  if (active) {
    load(A0, A1, vb + lane);
    for (int v0 = vb + lane;;) {
      if (v0 + 64 < ve) load(B0, B1, v0 + 64);
      comp(A0, A1, v0);
      if ((v0 += 64) >= ve) break;
      if (v0 + 64 < ve) load(A0, A1, v0 + 64);
      comp(B0, B1, v0);
      if ((v0 += 64) >= ve) break;
    }
  }
  acc0 = warp_sum(acc0);
  acc1 = warp_sum(acc1);
  if (KS > 1) {
    __shared__ float ps[8][2];
    if (lane == 0) ps[warp][0] = acc0, ps[warp][1] = acc1;
    __syncthreads();
    if (part != 0) return;
    for (int p = 1; p < KS; ++p) acc0 += ps[warp + p][0], acc1 += ps[warp + p][1];
  }
  if (lane == 0 && active) {
    float* out = a.out + (size_t)e * a.out_estride;
    if (a.gated)
      out[o0] = silu_times(acc0, acc1);
    else {
      out[o0] = acc0;
      if (o0 + 1 < a.features) out[o0 + 1] = acc1;
    }
  }
}

__device__ __forceinline__ int mrow(const BArgs& a, int fb, int i) {
  if (a.gated) {
    const int f = min(fb + (i & 7), a.features - 1);
    return 2 * f + (i >> 3);
  }
  return min(fb + i, a.features - 1);
}

// M: tensor cores, thread (g, q) loads 16-byte vector 4j + q of rows g and g + 8; x staged as bf16 in shared memory.
template <int KS>
__global__ void __launch_bounds__(256) m_kernel(BArgs a) {
  extern __shared__ __align__(16) uint4 xs[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, part = warp % KS, g = lane / 4, q = lane % 4;
  const int e = blockIdx.y, rg = blockIdx.x * (8 / KS) + warp / KS, fb = rg * (a.gated ? 8 : 16);
  const int vecs = a.K / 8, steps = (vecs + 3) / 4, slice = (steps + KS - 1) / KS, j0 = part * slice,
            j1 = min(steps, j0 + slice);
  const uint4* wA = reinterpret_cast<const uint4*>(a.w[e]) + (size_t)mrow(a, fb, g) * vecs;
  const uint4* wB = reinterpret_cast<const uint4*>(a.w[e]) + (size_t)mrow(a, fb, g + 8) * vecs;
  pdl_wait();
  pdl_go();
  const float* x = a.x + (size_t)e * a.x_estride;
  for (int i = threadIdx.x; i < vecs; i += 256) {
    const float4 lo = *reinterpret_cast<const float4*>(x + 8 * i), hi = *reinterpret_cast<const float4*>(x + 8 * i + 4);
    xs[i] =
        make_uint4(pack_bf16x2(lo.x, lo.y), pack_bf16x2(lo.z, lo.w), pack_bf16x2(hi.x, hi.y), pack_bf16x2(hi.z, hi.w));
  }
  __syncthreads();
  float acc[4] = {0, 0, 0, 0};
  for (int j = j0; j < j1; ++j) {
    const int v = 4 * j + q;
    uint4 pa = make_uint4(0, 0, 0, 0), pb = pa, xv = pa;
    if (v < vecs) {
      pa = __ldg(wA + v);
      pb = __ldg(wB + v);
      if (g == 0) xv = xs[v];
    }
    const uint32_t a0[4] = {pa.x, pb.x, pa.y, pb.y}, a1[4] = {pa.z, pb.z, pa.w, pb.w};
    mma_bf16(acc, a0, xv.x, xv.y);
    mma_bf16(acc, a1, xv.z, xv.w);
  }
  __shared__ float4 red[256];
  if (KS > 1) {
    red[threadIdx.x] = make_float4(acc[0], acc[1], acc[2], acc[3]);
    __syncthreads();
    if (part != 0) return;
    for (int p = 1; p < KS; ++p) {
      const float4 o = red[(warp + p) * 32 + lane];
      acc[0] += o.x, acc[1] += o.y, acc[2] += o.z, acc[3] += o.w;
    }
  }
  if (q != 0) return;
  float* out = a.out + (size_t)e * a.out_estride;
  if (a.gated) {
    if (fb + g < a.features) out[fb + g] = silu_times(acc[0], acc[2]);
  } else {
    if (fb + g < a.features) out[fb + g] = acc[0];
    if (fb + g + 8 < a.features) out[fb + g + 8] = acc[2];
  }
}

__global__ void ref_kernel(BArgs a, int round_x) {
  const int e = blockIdx.y, o = blockIdx.x * blockDim.x + threadIdx.x;
  if (o >= a.features) return;
  const float* x = a.x + (size_t)e * a.x_estride;
  float r[2];
  for (int h = 0; h < (a.gated ? 2 : 1); ++h) {
    const int row = a.gated ? 2 * o + h : o;
    double acc = 0;
    for (int k = 0; k < a.K; ++k) {
      const float wv = __uint_as_float(uint32_t(a.w[e][(size_t)row * a.K + k]) << 16);
      float xv = x[k];
      if (round_x) xv = __bfloat162float(__float2bfloat16_rn(xv));
      acc += (double)wv * xv;
    }
    r[h] = (float)acc;
  }
  float* out = a.out + (size_t)e * a.out_estride;
  out[o] = a.gated ? silu_times(r[0], r[1]) : r[0];
}

__global__ void fill_w(uint16_t* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    uint32_t h = (uint32_t)i * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    p[i] = __bfloat16_as_ushort(__float2bfloat16(((h % 2001) / 1000.0f - 1.0f) * 0.05f));
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

using Launch = std::function<void(const BArgs&, cudaStream_t)>;
template <typename K>
void launch(K kernel, dim3 grid, size_t smem, cudaStream_t s, const BArgs& a) {
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
template <int KS>
Launch sv() {
  return [](const BArgs& a, cudaStream_t s) {
    const int units = a.gated ? a.features : (a.features + 1) / 2;
    launch(s_kernel<KS>, dim3((units + 8 / KS - 1) / (8 / KS), kExperts), 0, s, a);
  };
}
template <int KS>
Launch mv() {
  return [](const BArgs& a, cudaStream_t s) {
    const int per = a.gated ? 8 : 16, rgs = (a.features + per - 1) / per;
    launch(m_kernel<KS>, dim3((rgs + 8 / KS - 1) / (8 / KS), kExperts), a.K * 2, s, a);
  };
}

int main() {
  const size_t gu = 2ull * kInter * kHidden, dn = (size_t)kHidden * kInter;
  struct L {
    uint16_t** gu;
    uint16_t** dn;
  };
  std::vector<L> layers(kLayers);
  size_t total = 0;
  uint32_t seed = 1;
  for (auto& l : layers) {
    uint16_t* h[2][kExperts];
    for (int ex = 0; ex < kExperts; ++ex) {
      CK(cudaMalloc(&h[0][ex], gu * 2));
      fill_w<<<1024, 256>>>(h[0][ex], gu, seed++);
      CK(cudaMalloc(&h[1][ex], dn * 2));
      fill_w<<<1024, 256>>>(h[1][ex], dn, seed++);
      total += (gu + dn) * 2;
    }
    CK(cudaMalloc(&l.gu, sizeof(void*) * kExperts));
    CK(cudaMemcpy(l.gu, h[0], sizeof(void*) * kExperts, cudaMemcpyHostToDevice));
    CK(cudaMalloc(&l.dn, sizeof(void*) * kExperts));
    CK(cudaMemcpy(l.dn, h[1], sizeof(void*) * kExperts, cudaMemcpyHostToDevice));
  }
  float *x, *act, *out, *ref_act, *ref_out;
  CK(cudaMalloc(&x, kHidden * 4));
  CK(cudaMalloc(&act, kExperts * kInter * 4));
  CK(cudaMalloc(&out, kExperts * kHidden * 4));
  CK(cudaMalloc(&ref_act, kExperts * kInter * 4));
  CK(cudaMalloc(&ref_out, kExperts * kHidden * 4));
  fill_x<<<16, 256>>>(x, kHidden, 99);
  CK(cudaDeviceSynchronize());
  printf("bf16 expert bytes per step %.3f GB (%d layers x %d experts)\n", total / 1e9, kLayers, kExperts);
  auto up = [&](const L& l, float* o) {
    return BArgs{(const uint16_t* const*)l.gu, x, 0, o, kInter, kInter, kHidden, 1};
  };
  auto down = [&](const L& l, const float* in, float* o) {
    return BArgs{(const uint16_t* const*)l.dn, in, kInter, o, kHidden, kHidden, kInter, 0};
  };
  cudaStream_t st;
  CK(cudaStreamCreate(&st));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  struct V {
    std::string name;
    Launch u, d;
    int rx;
  };
  std::vector<V> vs = {{"S KS1", sv<1>(), sv<1>(), 0},
                       {"S KS2", sv<2>(), sv<2>(), 0},
                       {"S KS4", sv<4>(), sv<4>(), 0},
                       {"M KS2", mv<2>(), mv<2>(), 1},
                       {"M KS4", mv<4>(), mv<4>(), 1},
                       {"M KS8", mv<8>(), mv<8>(), 1},
                       {"S KS2 up / M KS4 down", sv<2>(), mv<4>(), 1}};
  for (auto& v : vs) {
    v.u(up(layers[0], act), st);
    ref_kernel<<<dim3((kInter + 127) / 128, kExperts), 128, 0, st>>>(up(layers[0], ref_act), v.rx);
    v.d(down(layers[0], ref_act, out), st);
    ref_kernel<<<dim3((kHidden + 127) / 128, kExperts), 128, 0, st>>>(down(layers[0], ref_act, ref_out), v.rx);
    CK(cudaStreamSynchronize(st));
    auto err = [&](float* a, float* b, size_t n) {
      std::vector<float> ha(n), hb(n);
      CK(cudaMemcpy(ha.data(), a, n * 4, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(hb.data(), b, n * 4, cudaMemcpyDeviceToHost));
      double md = 0, mr = 0;
      for (size_t i = 0; i < n; ++i) md = fmax(md, fabs(ha[i] - hb[i])), mr = fmax(mr, fabs(hb[i]));
      return md / mr;
    };
    const double eu = err(act, ref_act, kExperts * kInter), ed = err(out, ref_out, kExperts * kHidden);
    auto time = [&](int which) {
      cudaGraph_t g;
      CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
      for (const L& l : layers) {
        if (which != 1) v.u(up(l, act), st);
        if (which != 0) v.d(down(l, act, out), st);
      }
      CK(cudaStreamEndCapture(st, &g));
      cudaGraphExec_t ex;
      CK(cudaGraphInstantiate(&ex, g, 0));
      for (int i = 0; i < 3; ++i) CK(cudaGraphLaunch(ex, st));
      CK(cudaEventRecord(e0, st));
      for (int i = 0; i < 20; ++i) CK(cudaGraphLaunch(ex, st));
      CK(cudaEventRecord(e1, st));
      CK(cudaEventSynchronize(e1));
      float ms;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      CK(cudaGraphExecDestroy(ex));
      CK(cudaGraphDestroy(g));
      return ms * 1000 / 20;
    };
    const double us = time(2), uu = time(0) / kLayers, ud = time(1) / kLayers;
    printf("%-24s step %7.1f us (%.2f TB/s) | up %6.1f us (%.2f TB/s) down %6.1f us (%.2f TB/s) | err %.1e %.1e\n",
           v.name.c_str(), us, total / (us * 1e-6) / 1e12, uu, kExperts * gu * 2 / (uu * 1e-6) / 1e12, ud,
           kExperts * dn * 2 / (ud * 1e-6) / 1e12, eu, ed);
  }
  return 0;
}
