// Paged causal attention on CPU (f32, bf16 or fp8 e4m3 KV cache), with per-layer sliding window and per-head sinks;
// also K/V stores (a bf16 cache rounds K/V to nearest even as they are written, an fp8 cache stores x / scale rounded
// to nearest and saturated; attention computes in f32 on the stored values, an fp8 code times its scale).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "backend/cpu/kernels/attention_avx2.h"
#include "backend/cpu/kernels/gemv_avx2.h"
#include "backend/cpu/kernels/kernels.h"
#include "backend/cpu/kernels/vec.h"

namespace rs::cpu {

void store_kv(const Tensor& k, const Tensor& v, const KvCache& cache, const BatchView& batch) {
  const Tensor &k_cache = cache.k, &v_cache = cache.v;
  const int64_t row_width = k_cache.dim(1) * k_cache.dim(2);
  RS_CHECK(k.dim(-1) * (k.ndim() == 3 ? k.dim(1) : 1) == row_width || k.numel() == k.dim(0) * row_width,
           "store_kv: k {} does not match cache rows of {}", k.shape_string(), row_width);
  check_kv_cache(cache, "CPU");
  const DType dtype = k_cache.dtype();
  const int32_t* slots = batch.kv_slots.data_as<int32_t>();
  for (int64_t t = 0; t < k.dim(0); ++t) {
    if (slots[t] < 0) continue;
    RS_DCHECK(slots[t] < k_cache.dim(0), "kv slot {} out of range", slots[t]);
    const float* kt = k.data_as<float>() + t * row_width;
    const float* vt = v.data_as<float>() + t * row_width;
    const int64_t at = slots[t] * row_width;
    if (dtype == DType::kBF16) {
      round_row_to_bf16(kt, row_width, k_cache.data_as<uint16_t>() + at);
      round_row_to_bf16(vt, row_width, v_cache.data_as<uint16_t>() + at);
    } else if (dtype == DType::kF8E4M3) {
      fp8_row_from_f32(kt, row_width, cache.k_scale, k_cache.data_as<uint8_t>() + at);
      fp8_row_from_f32(vt, row_width, cache.v_scale, v_cache.data_as<uint8_t>() + at);
    } else {
      std::memcpy(k_cache.data_as<float>() + at, kt, row_width * sizeof(float));
      std::memcpy(v_cache.data_as<float>() + at, vt, row_width * sizeof(float));
    }
  }
}

namespace {

// Row `row` (head_dim values) of a KV cache as f32: in place for an f32 cache, widened into `scratch` for bf16 and
// dequantized (code x scale) for fp8.
inline const float* cache_row(const Tensor& cache, float scale, int64_t row, int32_t hd, float* scratch) {
  if (cache.dtype() == DType::kF32) return cache.data_as<float>() + row * hd;
  if (cache.dtype() == DType::kF8E4M3) {
    fp8_row_to_f32(cache.data_as<uint8_t>() + row * hd, hd, scale, scratch);
  } else {
    bf16_row_to_f32(cache.data_as<uint16_t>() + row * hd, hd, scratch);
  }
  return scratch;
}

// Reference path: one query row at a time over a full score row (any head_dim).
void attention_rowwise(ThreadPool& pool, const Tensor& q, const KvCache& cache, const BatchView& batch,
                       const AttentionParams& params, Tensor out) {
  const int64_t num_tokens = q.dim(0);
  const int32_t heads = params.num_heads, kv_heads = params.num_kv_heads, hd = params.head_dim;
  const int32_t group = heads / kv_heads;
  const int32_t page_size = batch.page_size;
  const int64_t max_pages = batch.page_table.dim(1);
  const int32_t* positions = batch.positions.data_as<int32_t>();
  const int32_t* token_seq = batch.token_seq.data_as<int32_t>();
  const int32_t* page_table = batch.page_table.data_as<int32_t>();
  std::vector<float> sinks;
  if (!params.sinks.empty()) {
    sinks.resize(heads);
    load_row(params.sinks.view({1, heads}), 0, sinks.data(), heads);
  }
  // Causal work grows with the position, so item i pairs token u/2 with token T-1-u/2 (u = i / heads): each thread's
  // contiguous range of items then holds as many long rows as short ones.
  pool.parallel_for(num_tokens * heads, [&](int64_t begin, int64_t end) {
    std::vector<float> scores;
    std::vector<int64_t> rows;
    std::vector<float> acc(hd), row_scratch(hd);
    for (int64_t item = begin; item < end; ++item) {
      const int64_t u = item / heads;
      const int64_t t = u % 2 == 0 ? u / 2 : num_tokens - 1 - u / 2;
      const int32_t h = static_cast<int32_t>(item % heads);
      const int32_t kvh = h / group;
      const int32_t pos = positions[t];
      const int32_t first = params.window > 0 ? std::max(0, pos - params.window + 1) : 0;
      const int32_t* pages = page_table + token_seq[t] * max_pages;
      const float* qv = q.data_as<float>() + (t * heads + h) * hd;
      const int32_t count = last_key(batch, params, t) - first + 1;
      scores.resize(count);
      rows.resize(count);
      // Cache rows of keys first..pos, walking the page table without a division per key.
      int32_t page_index = first / page_size, offset = first % page_size;
      for (int32_t j = 0; j < count; ++j) {
        RS_DCHECK(pages[page_index] >= 0, "attention reads absent page for position {}", first + j);
        rows[j] = (static_cast<int64_t>(pages[page_index]) * page_size + offset) * kv_heads + kvh;
        if (++offset == page_size) offset = 0, ++page_index;
      }
      float max_score = sinks.empty() ? -INFINITY : sinks[h];
      for (int32_t j = 0; j < count; ++j) {
        const float s =
            dot_f32(qv, cache_row(cache.k, cache.k_scale, rows[j], hd, row_scratch.data()), hd) * params.scale;
        scores[j] = s;
        max_score = std::max(max_score, s);
      }
      exp_shifted_f32(scores.data(), max_score, scores.data(), count);
      float denom = sinks.empty() ? 0.0f : std::exp(sinks[h] - max_score);
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int32_t j = 0; j < count; ++j) {
        denom += scores[j];
        axpy_f32(scores[j], cache_row(cache.v, cache.v_scale, rows[j], hd, row_scratch.data()), acc.data(), hd);
      }
      float* o = out.data_as<float>() + (t * heads + h) * hd;
      const float inv = 1.0f / denom;
      for (int32_t d = 0; d < hd; ++d) o[d] = acc[d] * inv;
    }
  });
}

constexpr int64_t kItemRows = 32;  // query rows (tokens x heads sharing one KV head) per work item

// A work item's kernel: query rows of tokens [t0, t1) of one sequence x the heads of KV head `kvh`.
using ItemFn = void (*)(const Tensor&, const KvCache&, const BatchView&, const AttentionParams&, const float*, int64_t,
                        int64_t, int32_t, float*);

#if defined(__AVX512F__)
constexpr int32_t kKeyBlock = 32;  // keys per online-softmax step; their K/V rows stay in L1 while the item's rows pass

// Lane j of the result = sum of the 16 lanes of v[j] (a transposing reduction: 45 ops for 16 sums).
inline __m512 reduce16(const __m512 v[16]) {
  __m512 s2[8];
  for (int i = 0; i < 8; ++i)
    s2[i] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]), _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
  __m512 s4[4];  // per 128-bit lane: partial sums of 4 consecutive inputs
  for (int i = 0; i < 4; ++i)
    s4[i] = _mm512_add_ps(_mm512_shuffle_ps(s2[2 * i], s2[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                          _mm512_shuffle_ps(s2[2 * i], s2[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  __m512 s8[2];
  for (int i = 0; i < 2; ++i)
    s8[i] = _mm512_add_ps(_mm512_shuffle_f32x4(s4[2 * i], s4[2 * i + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                          _mm512_shuffle_f32x4(s4[2 * i], s4[2 * i + 1], _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm512_add_ps(_mm512_shuffle_f32x4(s8[0], s8[1], _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_f32x4(s8[0], s8[1], _MM_SHUFFLE(3, 1, 3, 1)));
}

// Lane j = q . k_rows[j] for 16 keys (callers point unused keys at a real row and mask them). The fixed count keeps
// the 16 accumulators in registers.
template <int kChunks>
inline __m512 dot16(const float* q, const float* const* k_rows) {
  __m512 acc[16];
  for (int j = 0; j < 16; ++j) acc[j] = _mm512_setzero_ps();
  for (int c = 0; c < kChunks; ++c) {
    const __m512 qc = _mm512_loadu_ps(q + 16 * c);
    for (int j = 0; j < 16; ++j) acc[j] = _mm512_fmadd_ps(qc, _mm512_loadu_ps(k_rows[j] + 16 * c), acc[j]);
  }
  return reduce16(acc);
}

// What both item kernels share: the item's query rows (tokens [t0, t1) of one sequence x the heads of KV head kvh),
// each with its key range, running max m and denominator l (a sink starts a row at m = sink, l = 1) and output
// accumulator; the cache row of each key; the valid-key masks of a block; the online-softmax update; the final
// normalisation. Kept per thread and reused from item to item.
class ItemRows {
 public:
  void start(const BatchView& batch, const AttentionParams& params, const float* sinks, int64_t t0, int64_t t1,
             int32_t kvh) {
    batch_ = &batch, t0_ = t0, kvh_ = kvh;
    heads_ = params.num_heads, kv_heads_ = params.num_kv_heads, group_ = heads_ / kv_heads_, hd_ = params.head_dim;
    pages_ = batch.page_table.data_as<int32_t>() + batch.token_seq.data_as<int32_t>()[t0] * batch.page_table.dim(1);
    rows_ = (t1 - t0) * group_;
    acc_.assign(rows_ * hd_, 0.0f), m_.resize(rows_), l_.resize(rows_), lo_.resize(rows_), hi_.resize(rows_);
    key_begin_ = INT32_MAX, key_end_ = 0;
    for (int64_t r = 0; r < rows_; ++r) {
      const int32_t pos = batch.positions.data_as<int32_t>()[token(r)];
      lo_[r] = params.window > 0 ? std::max(0, pos - params.window + 1) : 0;
      hi_[r] = last_key(batch, params, token(r));
      key_begin_ = std::min(key_begin_, lo_[r]), key_end_ = std::max(key_end_, hi_[r] + 1);
      m_[r] = sinks ? sinks[head(r)] : -INFINITY;
      l_[r] = sinks ? 1.0f : 0.0f;
    }
  }

  int64_t size() const { return rows_; }
  int64_t token(int64_t r) const { return t0_ + r / group_; }
  int32_t head(int64_t r) const { return kvh_ * group_ + static_cast<int32_t>(r % group_); }
  // Blocks start at multiples of kKeyBlock whatever the item's rows are, so a row's arithmetic (and result) does not
  // depend on which other tokens share its step: batching and chunking leave greedy outputs unchanged.
  int32_t first_block() const { return key_begin_ / kKeyBlock * kKeyBlock; }
  int32_t key_end() const { return key_end_; }
  // Element offset of key `pos` of this KV head in the cache; -1 before every row's window (never read, and its
  // page may be gone).
  int64_t cache_offset(int32_t pos) const {
    if (pos < key_begin_) return -1;
    const int32_t page_size = batch_->page_size;
    RS_DCHECK(pages_[pos / page_size] >= 0, "attention reads absent page for position {}", pos);
    const int64_t row = static_cast<int64_t>(pages_[pos / page_size]) * page_size + pos % page_size;
    return (row * kv_heads_ + kvh_) * hd_;
  }
  bool reads_block(int64_t r, int32_t kb, int32_t nk) const { return kb <= hi_[r] && kb + nk > lo_[r]; }
  // Which of the block's keys row r may see: lane j of valid[b] is key kb + 16 b + j.
  void masks(int64_t r, int32_t kb, int32_t nk, __mmask16 valid[kKeyBlock / 16]) const {
    const __m512 lane = _mm512_set_ps(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    const __m512 vlo = _mm512_set1_ps(static_cast<float>(lo_[r] - kb));
    const __m512 vhi = _mm512_set1_ps(static_cast<float>(hi_[r] - kb));
    for (int b = 0; b < kKeyBlock / 16; ++b) {
      const __m512 idx = _mm512_add_ps(lane, _mm512_set1_ps(16.0f * b));
      valid[b] = _mm512_cmp_ps_mask(idx, vlo, _CMP_GE_OQ) & _mm512_cmp_ps_mask(idx, vhi, _CMP_LE_OQ) &
                 static_cast<__mmask16>((1u << std::clamp(nk - 16 * b, 0, 16)) - 1);
    }
  }
  // Online-softmax update of row r with the block's scores s (lanes outside `valid` ignored): p = e^(s - m_new)
  // (0 where invalid), l = l * e^(m - m_new) + sum(p), m = m_new. Returns e^(m - m_new), the factor for the row's
  // output so far.
  float update(int64_t r, const __m512 s[kKeyBlock / 16], const __mmask16 valid[kKeyBlock / 16], float* p) {
    float block_max = -INFINITY;
    for (int b = 0; b < kKeyBlock / 16; ++b)
      if (valid[b]) block_max = std::max(block_max, _mm512_mask_reduce_max_ps(valid[b], s[b]));
    const float m_new = std::max(m_[r], block_max);
    const float correction = std::exp(m_[r] - m_new);  // 0 when m was -inf
    __m512 sum = _mm512_setzero_ps();
    for (int b = 0; b < kKeyBlock / 16; ++b) {
      const __m512 e = _mm512_maskz_mov_ps(valid[b], exp_f32x16(_mm512_sub_ps(s[b], _mm512_set1_ps(m_new))));
      _mm512_store_ps(p + 16 * b, e);
      sum = _mm512_add_ps(sum, e);
    }
    m_[r] = m_new;
    l_[r] = l_[r] * correction + _mm512_reduce_add_ps(sum);
    return correction;
  }
  float* acc(int64_t r) { return acc_.data() + r * hd_; }
  // out[token, head] = acc / l for every row.
  void write(float* out) const {
    for (int64_t r = 0; r < rows_; ++r) {
      const __m512 inv = _mm512_set1_ps(1.0f / l_[r]);
      float* o = out + (token(r) * heads_ + head(r)) * hd_;
      for (int32_t d = 0; d < hd_; d += 16)
        _mm512_storeu_ps(o + d, _mm512_mul_ps(_mm512_loadu_ps(acc_.data() + r * hd_ + d), inv));
    }
  }

 private:
  const BatchView* batch_ = nullptr;
  const int32_t* pages_ = nullptr;
  int64_t t0_ = 0, rows_ = 0;
  int32_t kvh_ = 0, heads_ = 0, kv_heads_ = 0, group_ = 1, hd_ = 0, key_begin_ = 0, key_end_ = 0;
  std::vector<float> acc_, m_, l_;
  std::vector<int32_t> lo_, hi_;
};

// Query rows of tokens [t0, t1) of one sequence x the heads of KV head `kvh`, over their keys in blocks of kKeyBlock
// with an online softmax. kChunks = head_dim / 16: each row's output accumulates in registers across a block.
// CacheT: float (f32 cache), uint16_t (bf16 cache, widened as each key block is copied) or uint8_t (fp8 cache,
// dequantized as each key block is copied).
template <int kChunks, typename CacheT>
void attend_item(const Tensor& q, const KvCache& cache, const BatchView& batch, const AttentionParams& params,
                 const float* sinks, int64_t t0, int64_t t1, int32_t kvh, float* out) {
  constexpr int32_t hd = kChunks * 16;
  thread_local ItemRows rows;
  rows.start(batch, params, sinks, t0, t1, kvh);
  const float* k_rows[kKeyBlock];
  const float* v_rows[kKeyBlock];
  alignas(64) float p[kKeyBlock];
  alignas(64) float k_block[kKeyBlock * hd];
  alignas(64) float v_block[kKeyBlock * hd];
  alignas(64) static const float zero_row[hd] = {};
  const bool copy_block = rows.size() >= 4;
  for (int32_t kb = rows.first_block(); kb < rows.key_end(); kb += kKeyBlock) {
    const int32_t nk = std::min(kKeyBlock, rows.key_end() - kb);
    for (int32_t j = 0; j < kKeyBlock; ++j) {
      const int64_t offset = j < nk ? rows.cache_offset(kb + j) : -1;
      if (offset < 0) {
        k_rows[j] = v_rows[j] = zero_row;
        continue;
      }
      const CacheT* k_src = cache.k.data_as<const CacheT>() + offset;
      const CacheT* v_src = cache.v.data_as<const CacheT>() + offset;
      // One KV head's rows sit kv_heads * head_dim values apart (4 KiB for 8 x 128 f32): read in place by many query
      // rows, a block's keys fall into the same few L1 sets and evict each other. A contiguous copy costs far less
      // (3x on a 128-token prefill); a decode item's few rows read an f32 cache in place.
      if constexpr (std::is_same_v<CacheT, float>) {
        if (copy_block) {
          std::memcpy(k_block + j * hd, k_src, hd * sizeof(float));
          std::memcpy(v_block + j * hd, v_src, hd * sizeof(float));
          k_rows[j] = k_block + j * hd, v_rows[j] = v_block + j * hd;
        } else {
          k_rows[j] = k_src, v_rows[j] = v_src;
        }
      } else if constexpr (std::is_same_v<CacheT, uint8_t>) {
        fp8_row_to_f32(k_src, hd, cache.k_scale, k_block + j * hd);
        fp8_row_to_f32(v_src, hd, cache.v_scale, v_block + j * hd);
        k_rows[j] = k_block + j * hd, v_rows[j] = v_block + j * hd;
      } else {
        bf16_row_to_f32(k_src, hd, k_block + j * hd);
        bf16_row_to_f32(v_src, hd, v_block + j * hd);
        k_rows[j] = k_block + j * hd, v_rows[j] = v_block + j * hd;
      }
    }
    for (int64_t r = 0; r < rows.size(); ++r) {
      if (!rows.reads_block(r, kb, nk)) continue;
      const float* qv = q.data_as<float>() + (rows.token(r) * params.num_heads + rows.head(r)) * hd;
      __m512 s[kKeyBlock / 16];
      __mmask16 valid[kKeyBlock / 16];
      rows.masks(r, kb, nk, valid);
      for (int b = 0; b < kKeyBlock / 16; ++b)
        s[b] = _mm512_mul_ps(dot16<kChunks>(qv, k_rows + 16 * b), _mm512_set1_ps(params.scale));
      const __m512 correction = _mm512_set1_ps(rows.update(r, s, valid, p));
      float* a = rows.acc(r);
      __m512 o[kChunks];
      for (int c = 0; c < kChunks; ++c) o[c] = _mm512_mul_ps(_mm512_loadu_ps(a + 16 * c), correction);
      for (int32_t j = 0; j < nk; ++j) {
        const __m512 pj = _mm512_set1_ps(p[j]);
        for (int c = 0; c < kChunks; ++c) o[c] = _mm512_fmadd_ps(pj, _mm512_loadu_ps(v_rows[j] + 16 * c), o[c]);
      }
      for (int c = 0; c < kChunks; ++c) _mm512_storeu_ps(a + 16 * c, o[c]);
    }
  }
  rows.write(out);
}

#if defined(__AVX512BF16__)
// Lane j = q . k_rows[j] for 16 keys, bf16 x bf16 products summed in f32 (head_dim = 32 * kVecs).
template <int kVecs>
inline __m512 dot16_bf16(const uint16_t* q, const uint16_t* const* k_rows) {
  __m512 acc[16];
  for (int j = 0; j < 16; ++j) acc[j] = _mm512_setzero_ps();
  for (int c = 0; c < kVecs; ++c) {
    const __m512bh qc = (__m512bh)_mm512_loadu_si512(q + 32 * c);
    for (int j = 0; j < 16; ++j)
      acc[j] = _mm512_dpbf16_ps(acc[j], qc, (__m512bh)_mm512_loadu_si512(k_rows[j] + 32 * c));
  }
  return reduce16(acc);
}

// attend_item for a bf16 cache: the products run in bf16 with f32 sums (AVX512-BF16), as transformers' bf16
// attention does: q and the probabilities are rounded to bf16, K and V are read as stored. Each block's V rows are
// interleaved in key pairs once ([dim][2 keys]) so that one dpbf16 adds two keys' contributions to 16 output dims;
// against widening every K/V value to f32 this cuts decode attention (two query rows per KV head) ~3x.
template <int kVecs>
void attend_item_bf16(const Tensor& q, const KvCache& cache, const BatchView& batch, const AttentionParams& params,
                      const float* sinks, int64_t t0, int64_t t1, int32_t kvh, float* out) {
  constexpr int32_t hd = kVecs * 32;
  thread_local ItemRows rows;
  thread_local std::vector<uint16_t> q_bf16;
  rows.start(batch, params, sinks, t0, t1, kvh);
  q_bf16.resize(rows.size() * hd);
  for (int64_t r = 0; r < rows.size(); ++r)
    round_row_to_bf16(q.data_as<float>() + (rows.token(r) * params.num_heads + rows.head(r)) * hd, hd,
                      q_bf16.data() + r * hd);
  // vpermt2w indices: dims 0..15 (then 16..31) of key a and key b, interleaved a0 b0 a1 b1 ...
  alignas(64) static const uint16_t kInterleave[2][32] = {
      {0, 32, 1, 33, 2,  34, 3,  35, 4,  36, 5,  37, 6,  38, 7,  39,
       8, 40, 9, 41, 10, 42, 11, 43, 12, 44, 13, 45, 14, 46, 15, 47},
      {16, 48, 17, 49, 18, 50, 19, 51, 20, 52, 21, 53, 22, 54, 23, 55,
       24, 56, 25, 57, 26, 58, 27, 59, 28, 60, 29, 61, 30, 62, 31, 63}};
  const __m512i interleave_lo = _mm512_load_si512(kInterleave[0]), interleave_hi = _mm512_load_si512(kInterleave[1]);
  alignas(64) static const uint16_t zero_row[hd] = {};
  const uint16_t* k_rows[kKeyBlock];
  const uint16_t* v_rows[kKeyBlock];
  alignas(64) uint16_t k_block[kKeyBlock * hd];
  alignas(64) uint16_t v_pairs[kKeyBlock / 2][2 * hd];
  alignas(64) float p[kKeyBlock];
  alignas(64) uint16_t p_bf16[kKeyBlock];
  const bool copy_block = rows.size() >= 4;  // see attend_item
  for (int32_t kb = rows.first_block(); kb < rows.key_end(); kb += kKeyBlock) {
    const int32_t nk = std::min(kKeyBlock, rows.key_end() - kb);
    for (int32_t j = 0; j < kKeyBlock; ++j) {
      const int64_t offset = j < nk ? rows.cache_offset(kb + j) : -1;
      if (offset < 0) {
        k_rows[j] = v_rows[j] = zero_row;
        continue;
      }
      k_rows[j] = cache.k.data_as<const uint16_t>() + offset;
      v_rows[j] = cache.v.data_as<const uint16_t>() + offset;
      if (copy_block) {
        std::memcpy(k_block + j * hd, k_rows[j], hd * sizeof(uint16_t));
        k_rows[j] = k_block + j * hd;
      }
    }
    const int32_t pairs = (nk + 1) / 2;
    for (int32_t i = 0; i < pairs; ++i)
      for (int c = 0; c < kVecs; ++c) {
        const __m512i a = _mm512_loadu_si512(v_rows[2 * i] + 32 * c),
                      b = _mm512_loadu_si512(v_rows[2 * i + 1] + 32 * c);
        _mm512_store_si512(v_pairs[i] + 64 * c, _mm512_permutex2var_epi16(a, interleave_lo, b));
        _mm512_store_si512(v_pairs[i] + 64 * c + 32, _mm512_permutex2var_epi16(a, interleave_hi, b));
      }
    for (int64_t r = 0; r < rows.size(); ++r) {
      if (!rows.reads_block(r, kb, nk)) continue;
      __m512 s[kKeyBlock / 16];
      __mmask16 valid[kKeyBlock / 16];
      rows.masks(r, kb, nk, valid);
      for (int b = 0; b < kKeyBlock / 16; ++b)
        s[b] = _mm512_mul_ps(dot16_bf16<kVecs>(q_bf16.data() + r * hd, k_rows + 16 * b), _mm512_set1_ps(params.scale));
      const __m512 correction = _mm512_set1_ps(rows.update(r, s, valid, p));
      for (int b = 0; b < kKeyBlock / 16; ++b)
        _mm256_store_si256(reinterpret_cast<__m256i*>(p_bf16 + 16 * b),
                           (__m256i)_mm512_cvtneps_pbh(_mm512_load_ps(p + 16 * b)));
      const int32_t* p_pairs = reinterpret_cast<const int32_t*>(p_bf16);  // (p[2i], p[2i+1]) per 32-bit lane
      float* a = rows.acc(r);
      __m512 o[2 * kVecs];
      for (int u = 0; u < 2 * kVecs; ++u) o[u] = _mm512_mul_ps(_mm512_loadu_ps(a + 16 * u), correction);
      for (int32_t i = 0; i < pairs; ++i) {
        const __m512bh pp = (__m512bh)_mm512_set1_epi32(p_pairs[i]);
        for (int u = 0; u < 2 * kVecs; ++u)
          o[u] = _mm512_dpbf16_ps(o[u], (__m512bh)_mm512_load_si512(v_pairs[i] + 32 * u), pp);
      }
      for (int u = 0; u < 2 * kVecs; ++u) _mm512_storeu_ps(a + 16 * u, o[u]);
    }
  }
  rows.write(out);
}
#endif

template <typename CacheT>
ItemFn item_kernel_for(int32_t head_dim) {
  switch (head_dim) {
    case 16: return attend_item<1, CacheT>;
    case 32: return attend_item<2, CacheT>;
    case 48: return attend_item<3, CacheT>;
    case 64: return attend_item<4, CacheT>;
    case 80: return attend_item<5, CacheT>;
    case 96: return attend_item<6, CacheT>;
    case 128: return attend_item<8, CacheT>;
    case 256: return attend_item<16, CacheT>;
    default: return nullptr;
  }
}

ItemFn item_kernel(DType cache_dtype, int32_t head_dim) {
  if (cache_dtype == DType::kF32) return item_kernel_for<float>(head_dim);
  if (cache_dtype == DType::kF8E4M3) return item_kernel_for<uint8_t>(head_dim);
#if defined(__AVX512BF16__)
  switch (head_dim) {
    case 32: return attend_item_bf16<1>;
    case 64: return attend_item_bf16<2>;
    case 128: return attend_item_bf16<4>;
    case 256: return attend_item_bf16<8>;
    default: break;
  }
#endif
  return item_kernel_for<uint16_t>(head_dim);
}
#endif

}  // namespace

void attention(ThreadPool& pool, const Tensor& q, const KvCache& cache, const BatchView& batch,
               const AttentionParams& params, Tensor out) {
  check_kv_cache(cache, "CPU");
  ItemFn kernel = nullptr;
#if defined(__AVX512F__)
  if (!avx2_kernels_forced()) kernel = item_kernel(cache.k.dtype(), params.head_dim);
#endif
  // CPUs without AVX-512 (kernels/attention_avx2.h), and head sizes the AVX-512 kernels lack.
  if (kernel == nullptr && avx2_attention_supports(params.head_dim)) kernel = avx2_attend_item;
  if (kernel != nullptr) {
    std::vector<float> sinks;
    if (!params.sinks.empty()) {
      sinks.resize(params.num_heads);
      load_row(params.sinks.view({1, params.num_heads}), 0, sinks.data(), params.num_heads);
    }
    // Items: runs of up to kItemRows / group consecutive tokens of one sequence, x each KV head.
    const int32_t group = params.num_heads / params.num_kv_heads;
    const int64_t num_tokens = q.dim(0), max_tokens = std::max<int64_t>(1, kItemRows / group);
    const int32_t* token_seq = batch.token_seq.data_as<int32_t>();
    const int32_t* positions = batch.positions.data_as<int32_t>();
    struct Item {
      int64_t t0, t1, cost;
    };
    std::vector<Item> segments;
    for (int64_t t = 0; t < num_tokens;) {
      int64_t end = t + 1;
      while (end < num_tokens && end - t < max_tokens && token_seq[end] == token_seq[t]) ++end;
      int64_t keys = 0;
      for (int64_t u = t; u < end; ++u) {
        const int64_t first = params.window > 0 ? std::max(0, positions[u] - params.window + 1) : 0;
        keys = std::max<int64_t>(keys, last_key(batch, params, u) + 1 - first);
      }
      segments.push_back({t, end, (end - t) * keys});
      t = end;
    }
    // Threads take contiguous ranges of items: order them heaviest, lightest, second heaviest, ... so that every
    // range holds a similar amount of work (causal prefill rows get longer with the position).
    std::vector<size_t> order(segments.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return segments[a].cost > segments[b].cost; });
    std::vector<size_t> balanced;
    for (size_t i = 0, j = order.size(); i < j;) {
      balanced.push_back(order[i++]);
      if (i < j) balanced.push_back(order[--j]);
    }
    const int32_t kv_heads = params.num_kv_heads;
    float* o = out.data_as<float>();
    pool.parallel_for(static_cast<int64_t>(balanced.size()) * kv_heads, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const Item& item = segments[balanced[i / kv_heads]];
        kernel(q, cache, batch, params, sinks.empty() ? nullptr : sinks.data(), item.t0, item.t1,
               static_cast<int32_t>(i % kv_heads), o);
      }
    });
    return;
  }
  attention_rowwise(pool, q, cache, batch, params, out);
}

}  // namespace rs::cpu
