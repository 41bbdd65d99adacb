#include "backend/cpu/kernels/attention_avx2.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/kernels/gemv_avx2.h"
#include "backend/cpu/kernels/simd.h"
#include "backend/cpu/kernels/vec.h"

namespace rs::cpu {

bool avx2_attention_supports(int32_t head_dim) {
  return cpu_has_avx2_fma() && head_dim > 0 && head_dim % 8 == 0 && head_dim <= 256;
}

#if defined(__x86_64__)
namespace {

constexpr int32_t kKeys = 32;  // keys per block (aligned to multiples of 32 positions)

// Cache row `row` of `t` (hd values) as f32 into `out`.
RS_TARGET_AVX2 void widen_row(const Tensor& t, float scale, int64_t row, int32_t hd, float* out) {
  if (t.dtype() == DType::kF32) {
    std::memcpy(out, t.data_as<float>() + row * hd, hd * sizeof(float));
  } else if (t.dtype() == DType::kBF16) {
    const uint16_t* in = t.data_as<uint16_t>() + row * hd;
    for (int32_t i = 0; i < hd; i += 8) _mm256_storeu_ps(out + i, load_bf16x8(in + i));
  } else {
    fp8_row_to_f32(t.data_as<uint8_t>() + row * hd, hd, scale, out);  // the table's values, NaN codes included
  }
}

RS_TARGET_AVX2 float dot(const float* a, const float* b, int32_t hd) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int32_t i = 0;
  for (; i + 16 <= hd; i += 16) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
  }
  if (i < hd) acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
  return sum_f32x8(_mm256_add_ps(acc0, acc1));
}

struct ItemState {
  std::vector<int32_t> lo, hi;   // each row's key range
  std::vector<float> m, l, acc;  // running max, denominator, output accumulator [rows, hd]
  std::vector<float> k_block, v_block;
};

}  // namespace

RS_TARGET_AVX2 void avx2_attend_item(const Tensor& q, const KvCache& cache, const BatchView& batch,
                                     const AttentionParams& params, const float* sinks, int64_t t0, int64_t t1,
                                     int32_t kvh, float* out) {
  const int32_t heads = params.num_heads, kv_heads = params.num_kv_heads, hd = params.head_dim;
  const int32_t group = heads / kv_heads, page_size = batch.page_size;
  const int64_t rows = (t1 - t0) * group;
  const int32_t* positions = batch.positions.data_as<int32_t>();
  const int32_t* pages =
      batch.page_table.data_as<int32_t>() + batch.token_seq.data_as<int32_t>()[t0] * batch.page_table.dim(1);
  thread_local ItemState st;
  st.lo.resize(rows), st.hi.resize(rows), st.m.resize(rows), st.l.resize(rows);
  st.acc.assign(rows * hd, 0.0f);
  st.k_block.resize(kKeys * hd), st.v_block.resize(kKeys * hd);
  const auto token = [&](int64_t r) { return t0 + r / group; };
  const auto head = [&](int64_t r) { return kvh * group + static_cast<int32_t>(r % group); };
  int32_t key_begin = INT32_MAX, key_end = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t pos = positions[token(r)];
    st.lo[r] = params.window > 0 ? std::max(0, pos - params.window + 1) : 0;
    st.hi[r] = last_key(batch, params, token(r));
    key_begin = std::min(key_begin, st.lo[r]), key_end = std::max(key_end, st.hi[r] + 1);
    st.m[r] = sinks ? sinks[head(r)] : -INFINITY;  // a sink starts a row at m = sink, l = 1
    st.l[r] = sinks ? 1.0f : 0.0f;
  }
  alignas(32) float s[kKeys], p[kKeys];
  for (int32_t kb = key_begin / kKeys * kKeys; kb < key_end; kb += kKeys) {
    const int32_t nk = std::min(kKeys, key_end - kb);
    for (int32_t j = 0; j < nk; ++j) {
      const int32_t pos = kb + j;
      float* k_row = st.k_block.data() + j * hd;
      float* v_row = st.v_block.data() + j * hd;
      if (pos < key_begin) {  // before every row's window: never weighted, and its page may be gone
        std::fill(k_row, k_row + hd, 0.0f), std::fill(v_row, v_row + hd, 0.0f);
        continue;
      }
      RS_DCHECK(pages[pos / page_size] >= 0, "attention reads absent page for position {}", pos);
      const int64_t cache_row =
          (static_cast<int64_t>(pages[pos / page_size]) * page_size + pos % page_size) * kv_heads + kvh;
      widen_row(cache.k, cache.k_scale, cache_row, hd, k_row);
      widen_row(cache.v, cache.v_scale, cache_row, hd, v_row);
    }
    for (int64_t r = 0; r < rows; ++r) {
      if (kb > st.hi[r] || kb + nk <= st.lo[r]) continue;
      const float* qv = q.data_as<float>() + (token(r) * heads + head(r)) * hd;
      // The row's keys in this block: j_first..j_last (contiguous); the others get no weight.
      const int32_t j_first = std::max(0, st.lo[r] - kb), j_last = std::min(nk - 1, st.hi[r] - kb);
      float block_max = -INFINITY;
      for (int32_t j = 0; j < kKeys; ++j) {
        s[j] = j >= j_first && j <= j_last ? dot(qv, st.k_block.data() + j * hd, hd) * params.scale : 0.0f;
        if (j >= j_first && j <= j_last) block_max = std::max(block_max, s[j]);
      }
      const float m_new = std::max(st.m[r], block_max);
      const float correction = std::exp(st.m[r] - m_new);  // 0 when m was -inf
      const __m256i first = _mm256_set1_epi32(j_first - 1), last = _mm256_set1_epi32(j_last + 1);
      __m256 sum = _mm256_setzero_ps();
      for (int32_t j = 0; j < kKeys; j += 8) {
        const __m256i lane = _mm256_add_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(j));
        const __m256 valid =
            _mm256_castsi256_ps(_mm256_and_si256(_mm256_cmpgt_epi32(lane, first), _mm256_cmpgt_epi32(last, lane)));
        const __m256 e = _mm256_and_ps(valid, exp_f32x8(_mm256_sub_ps(_mm256_load_ps(s + j), _mm256_set1_ps(m_new))));
        _mm256_store_ps(p + j, e);
        sum = _mm256_add_ps(sum, e);
      }
      st.m[r] = m_new;
      st.l[r] = st.l[r] * correction + sum_f32x8(sum);
      float* a = st.acc.data() + r * hd;
      const __m256 corr = _mm256_set1_ps(correction);
      for (int32_t c = 0; c < hd; c += 8) {
        __m256 o = _mm256_mul_ps(_mm256_loadu_ps(a + c), corr);
        for (int32_t j = 0; j < nk; ++j)
          o = _mm256_fmadd_ps(_mm256_set1_ps(p[j]), _mm256_loadu_ps(st.v_block.data() + j * hd + c), o);
        _mm256_storeu_ps(a + c, o);
      }
    }
  }
  for (int64_t r = 0; r < rows; ++r) {
    const __m256 inv = _mm256_set1_ps(1.0f / st.l[r]);
    float* o = out + (token(r) * heads + head(r)) * hd;
    for (int32_t c = 0; c < hd; c += 8)
      _mm256_storeu_ps(o + c, _mm256_mul_ps(_mm256_loadu_ps(st.acc.data() + r * hd + c), inv));
  }
}

#else

void avx2_attend_item(const Tensor&, const KvCache&, const BatchView&, const AttentionParams&, const float*, int64_t,
                      int64_t, int32_t, float*) {
  RS_FAIL("avx2_attend_item needs an x86-64 CPU");
}

#endif

}  // namespace rs::cpu
