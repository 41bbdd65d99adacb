// Grouped GEMM on tensor cores for MoE experts and MXFP4 prefill: out[r] = x[r] . W^T over row chunks that each use
// one weight group (an expert), mma.sync m16n8k16 with bf16 operands and f32 accumulation (the fast path: activations
// are rounded to bf16, weights are exact in bf16 after MXFP4 decoding).
//
// A block computes up to 64 activation rows (one chunk) x 128 weight rows, K in tiles of 64 staged through shared
// memory by cp.async in three stages: the f32 activations (gathered through x_rows) and the raw weight bytes, bf16 or
// MXFP4 blocks + their E8M0 scales, which stay 4.25 bits per weight until they are decoded in registers. Each of the 8
// warps owns 16 weight rows (two n8 tiles) against all the chunk's rows, skipping 16-row tiles past the chunk.
//
// K order inside each 32-element block is permuted, identically for both operands: a thread of quad position q owns
// the 8 consecutive elements 8q..8q+7 (one 16-byte bf16 vector or one 32-bit MXFP4 word) and feeds them to the mma's
// k slots {2q, 2q+1, 2q+8, 2q+9} of two k16 steps. So fragments come from single vector loads and an MXFP4 word is
// decoded by the thread that uses it, with no bf16 copy of the weights in shared memory. The sum over K is unchanged.
//
// Epilogue: bias, then the output stored as f32, or a gated pair activation (SwiGLU / gpt-oss's clamped SwiGLU) over
// adjacent output columns, which the accumulator layout gives each thread as a pair.
#include <algorithm>

#include "backend/cuda/cuda_check.cuh"
#include "backend/cuda/kernels/launch.cuh"
#include "backend/cuda/kernels/mma.cuh"
#include "backend/cuda/kernels/weight_decode.cuh"

namespace rs::cuda {
namespace {

constexpr int kBM = kMmaRows, kBN = 128, kBK = 64, kWarps = 8, kThreads = kWarps * 32, kStages = 3;
constexpr int kAStride = kBK + 4;  // floats per staged activation row (padding: no bank conflicts on reads)
constexpr int kFp4RowBytes = 48;   // 32 bytes of MXFP4 per row per stage, padded (conflict-free word reads)
constexpr int kScaleWindow = 8;    // two aligned 32-bit words that hold a row's 2 scale bytes of a stage
constexpr int kABytes = kBM * kAStride * 4;
constexpr int kABf16Bytes = kBM * kBK * 2;

template <WeightFormat F>
constexpr int kBBytes = F == WeightFormat::kMxfp4 ? kBN*(kFp4RowBytes + kScaleWindow) : kBN* kBK * 2;

template <WeightFormat F>
constexpr int kSmemBytes = kStages*(kABytes + kBBytes<F>)+kABf16Bytes;

// 16-byte chunk c of a 128-byte bf16 row r: rows r and r + 1 use disjoint halves of the banks for chunks 0..3 vs 4..7.
__device__ __forceinline__ int chunk_offset(int row, int chunk) {
  return row * kBK + ((chunk ^ ((row & 1) << 2)) << 3);
}

// 4 bytes global -> shared; bytes < 4 zero-fills the rest (src need only be valid for `bytes`).
__device__ __forceinline__ void cp_async_4(void* dst, const void* src, int bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(shared_address(dst)), "l"(src), "r"(bytes));
}

// Eight MXFP4 codes (one word, element i in nibble i) times the block scale -> four bf16x2 words.
__device__ __forceinline__ void decode_fp4x8(uint32_t word, float scale, uint32_t (&out)[4]) {
  float w[8];
  decode_word<WeightFormat::kMxfp4>(word, w);
#pragma unroll
  for (int i = 0; i < 4; ++i) out[i] = pack_bf16x2(w[2 * i] * scale, w[2 * i + 1] * scale);
}

template <WeightFormat F>
__global__ void __launch_bounds__(kThreads, 2) gemm_mma_kernel(LinearArgs a) {
  extern __shared__ __align__(16) unsigned char smem[];
  float* a_stage = reinterpret_cast<float*>(smem);                                          // [stages][BM][kAStride]
  unsigned char* b_stage = smem + kStages * kABytes;                                        // [stages][kBBytes]
  uint16_t* a_bf16 = reinterpret_cast<uint16_t*>(smem + kStages * (kABytes + kBBytes<F>));  // [BM][BK], swizzled

  pdl_enter();
  int group, count;
  int64_t first_row;
  if (!block_chunk(a.rows, group, first_row, count)) return;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, q = lane % 4;
  const bool paired = a.pair_act != PairActivation::kNone;
  const int64_t weight_rows = paired ? 2 * a.out_features : a.out_features;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kBN;
  const int64_t in = a.in_features;
  const int k_tiles = static_cast<int>((in + kBK - 1) / kBK);

  // Activation rows this thread stages: rows tid / 16 + 16 i, 16-byte piece tid % 16 of each.
  const float* a_src[kBM / 16];
#pragma unroll
  for (int i = 0; i < kBM / 16; ++i) {
    const int r = tid / 16 + 16 * i;
    const int64_t row = first_row + min(r, count - 1);
    a_src[i] = r < count ? a.x + (a.x_rows ? a.x_rows[row] : row) * a.x_stride : nullptr;
  }
  // The weight row of tile row j: (gate, up) pairs from two tables interleave on the fly.
  const auto weight_row = [&](int j, const unsigned char*& base, const uint8_t*& scales) {
    const int64_t n = n0 + j;
    int64_t row = n;
    const void* w = group_weight(a.w, group);
    const uint8_t* s = F == WeightFormat::kMxfp4 ? group_scales(a.w, group) : nullptr;
    if (a.w.up_table) {
      row = n >> 1;
      if (n & 1) {
        w = a.w.up_table[group];
        if constexpr (F == WeightFormat::kMxfp4) s = a.w.up_scale_table[group];
      }
    }
    const int64_t row_bytes = F == WeightFormat::kMxfp4 ? in / 2 : in * 2;
    base = n < weight_rows ? static_cast<const unsigned char*>(w) + row * row_bytes : nullptr;
    scales = n < weight_rows && s ? s + row * (in / 32) : nullptr;
  };
  // MXFP4: one (row, 16-byte piece) per thread; bf16: rows tid / 8 + 32 i, piece tid % 8.
  constexpr int kBRowsPerThread = F == WeightFormat::kMxfp4 ? 1 : kBN / 32;
  const unsigned char* b_src[kBRowsPerThread];
  const uint8_t* s_src = nullptr;
#pragma unroll
  for (int i = 0; i < kBRowsPerThread; ++i) {
    const int j = F == WeightFormat::kMxfp4 ? tid / 2 : tid / 8 + 32 * i;
    const uint8_t* s = nullptr;
    weight_row(j, b_src[i], s);
    if (i == 0) s_src = s;
  }
  // MXFP4: where the scale bytes of this thread's fragment rows (16 warp + 8 nt + g) sit in their stage windows.
  int scale_shift[2] = {0, 0};
  if constexpr (F == WeightFormat::kMxfp4) {
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
      const unsigned char* unused = nullptr;
      const uint8_t* s = nullptr;
      weight_row(warp * 16 + nt * 8 + g, unused, s);
      scale_shift[nt] = static_cast<int>(reinterpret_cast<uintptr_t>(s) & 3);
    }
  }

  const auto load_stage = [&](int kt) {
    const int stage = kt % kStages;
    const int64_t k0 = static_cast<int64_t>(kt) * kBK;
    float* as = a_stage + stage * (kABytes / 4);
#pragma unroll
    for (int i = 0; i < kBM / 16; ++i) {
      const int r = tid / 16 + 16 * i, piece = tid % 16;
      const int64_t k = k0 + 4 * piece;
      const bool valid = a_src[i] && k < in;
      cp_async_16(as + r * kAStride + 4 * piece, valid ? a_src[i] + k : a.x, valid ? 16 : 0);
    }
    unsigned char* bs = b_stage + stage * kBBytes<F>;
    if constexpr (F == WeightFormat::kMxfp4) {
      const int j = tid / 2, piece = tid % 2;
      const int64_t byte = k0 / 2 + 16 * piece;
      const bool valid = b_src[0] && byte < in / 2;
      cp_async_16(bs + j * kFp4RowBytes + 16 * piece, valid ? b_src[0] + byte : static_cast<const void*>(a.x),
                  valid ? 16 : 0);
      // The row's two scale bytes of this stage lie in the two aligned words from (offset & ~3).
      unsigned char* window = bs + kBN * kFp4RowBytes + j * kScaleWindow;
      if (s_src) {
        const uintptr_t addr = reinterpret_cast<uintptr_t>(s_src + k0 / 32);
        const uint8_t* word = reinterpret_cast<const uint8_t*>(addr & ~uintptr_t{3}) + 4 * piece;
        const int64_t left = (s_src + in / 32) - word;  // bytes of this row's scales from `word` (never read past)
        const int bytes = left <= 0 ? 0 : left >= 4 ? 4 : static_cast<int>(left);
        cp_async_4(window + 4 * piece, bytes > 0 ? word : s_src, bytes);
      }
    } else {
#pragma unroll
      for (int i = 0; i < kBRowsPerThread; ++i) {
        const int j = tid / 8 + 32 * i, piece = tid % 8;
        const int64_t k = k0 + 8 * piece;
        const bool valid = b_src[i] && k < in;
        cp_async_16(reinterpret_cast<uint16_t*>(bs) + chunk_offset(j, piece),
                    valid ? static_cast<const void*>(b_src[i] + 2 * k) : a.x, valid ? 16 : 0);
      }
    }
  };

  float acc[kBM / 16][2][4] = {};
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < k_tiles) load_stage(s);
    cp_async_commit();
  }
  const int m_tiles = (count + 15) / 16;
  for (int kt = 0; kt < k_tiles; ++kt) {
    cp_async_wait<kStages - 2>();
    __syncthreads();  // stage kt landed for every thread; every warp is done with tile kt - 1
    if (kt + kStages - 1 < k_tiles) load_stage(kt + kStages - 1);
    cp_async_commit();
    {  // activations of stage kt: f32 -> bf16, two 8-element chunks per thread
      const float* as = a_stage + (kt % kStages) * (kABytes / 4);
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const int c = tid + kThreads * i, r = c / 8, chunk = c % 8;
        const float4 lo = *reinterpret_cast<const float4*>(as + r * kAStride + 8 * chunk);
        const float4 hi = *reinterpret_cast<const float4*>(as + r * kAStride + 8 * chunk + 4);
        const uint4 packed = make_uint4(pack_bf16x2(lo.x, lo.y), pack_bf16x2(lo.z, lo.w), pack_bf16x2(hi.x, hi.y),
                                        pack_bf16x2(hi.z, hi.w));
        *reinterpret_cast<uint4*>(a_bf16 + chunk_offset(r, chunk)) = packed;
      }
    }
    __syncthreads();
    const unsigned char* bs = b_stage + (kt % kStages) * kBBytes<F>;
#pragma unroll
    for (int blk = 0; blk < kBK / 32; ++blk) {
      if (static_cast<int64_t>(kt) * kBK + 32 * blk >= in) break;  // MXFP4 K % 64 == 32: the stage's second block
      uint32_t b[2][4];
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
        const int j = warp * 16 + nt * 8 + g;
        if constexpr (F == WeightFormat::kMxfp4) {
          const uint32_t word = *reinterpret_cast<const uint32_t*>(bs + j * kFp4RowBytes + 16 * blk + 4 * q);
          // Scale byte of block (k0 / 32 + blk) of row j, at its offset inside the stage's window.
          const unsigned char* window = bs + kBN * kFp4RowBytes + j * kScaleWindow;
          const int shift = (scale_shift[nt] + 2 * kt) & 3;
          decode_fp4x8(word, e8m0_to_float(window[shift + blk]), b[nt]);
        } else {
          const uint4 v =
              *reinterpret_cast<const uint4*>(reinterpret_cast<const uint16_t*>(bs) + chunk_offset(j, 4 * blk + q));
          b[nt][0] = v.x, b[nt][1] = v.y, b[nt][2] = v.z, b[nt][3] = v.w;
        }
      }
#pragma unroll
      for (int mt = 0; mt < kBM / 16; ++mt) {
        if (mt >= m_tiles) break;
        const uint4 lo = *reinterpret_cast<const uint4*>(a_bf16 + chunk_offset(mt * 16 + g, 4 * blk + q));
        const uint4 hi = *reinterpret_cast<const uint4*>(a_bf16 + chunk_offset(mt * 16 + g + 8, 4 * blk + q));
        const uint32_t a0[4] = {lo.x, hi.x, lo.y, hi.y}, a1[4] = {lo.z, hi.z, lo.w, hi.w};
#pragma unroll
        for (int nt = 0; nt < 2; ++nt) {
          mma_bf16(acc[mt][nt], a0, b[nt][0], b[nt][1]);
          mma_bf16(acc[mt][nt], a1, b[nt][2], b[nt][3]);
        }
      }
    }
  }
  cp_async_wait_all();

  // Epilogue: thread (g, q) holds rows mt * 16 + g (+ 8), weight rows n, n + 1 with n = n0 + 16 warp + 8 nt + 2 q.
#pragma unroll
  for (int nt = 0; nt < 2; ++nt) {
    const int64_t n = n0 + warp * 16 + nt * 8 + 2 * q;
    if (n >= weight_rows) continue;
    const bool has1 = n + 1 < weight_rows;
    const float bias0 = group_bias(a.w, group, n), bias1 = has1 ? group_bias(a.w, group, n + 1) : 0.0f;
#pragma unroll
    for (int mt = 0; mt < kBM / 16; ++mt) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = mt * 16 + g + 8 * h;
        if (r >= count) continue;
        float* out = a.out + (first_row + r) * a.out_stride;
        const float v0 = acc[mt][nt][2 * h] + bias0, v1 = acc[mt][nt][2 * h + 1] + bias1;
        if (paired) {
          out[n / 2] = pair_activation(a.pair_act, v0, v1, a.swiglu_alpha, a.swiglu_limit);
        } else {
          out[n] = v0;
          if (has1) out[n + 1] = v1;
        }
      }
    }
  }
}

template <WeightFormat F>
void launch_for_format(const LinearArgs& a, cudaStream_t stream) {
  static const bool configured = [] {
    RS_CUDA_CHECK(cudaFuncSetAttribute(gemm_mma_kernel<F>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes<F>));
    return true;
  }();
  (void)configured;
  const int64_t weight_rows = a.pair_act != PairActivation::kNone ? 2 * a.out_features : a.out_features;
  const dim3 grid(
      static_cast<unsigned>(ceil_div(weight_rows, kBN)),
      static_cast<unsigned>(a.rows.list ? a.rows.max_chunks : ceil_div(a.rows.total_rows, a.rows.chunk_rows)));
  launch_kernel(gemm_mma_kernel<F>, grid, kThreads, kSmemBytes<F>, stream, a);
}

}  // namespace

bool gemm_mma_supported(WeightFormat format, int64_t in_features, const float* x, int64_t x_stride,
                        const void* weight) {
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  const bool format_ok = (format == WeightFormat::kBF16 && in_features % 8 == 0) ||
                         (format == WeightFormat::kMxfp4 && in_features % 32 == 0);
  return format_ok && in_features <= INT32_MAX && x_stride % 4 == 0 && aligned(x) &&
         (weight == nullptr || aligned(weight));
}

void launch_gemm_mma(const LinearArgs& a, cudaStream_t stream) {
  RS_CHECK(a.rows.chunk_rows >= 1 && a.rows.chunk_rows <= kMmaRows, "mma GEMM chunk of {} rows", a.rows.chunk_rows);
  RS_CHECK(a.glu_offset == 0, "mma GEMM: glu_offset is the GEMV's; use pair_act");
  if (a.out_features == 0) return;
  switch (a.format) {
    case WeightFormat::kBF16: return launch_for_format<WeightFormat::kBF16>(a, stream);
    case WeightFormat::kMxfp4: return launch_for_format<WeightFormat::kMxfp4>(a, stream);
    default: RS_FAIL("mma GEMM takes bf16 or MXFP4 weights");
  }
}

}  // namespace rs::cuda
