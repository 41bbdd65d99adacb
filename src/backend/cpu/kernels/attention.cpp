// Paged causal attention on CPU (f32 cache), with per-layer sliding window and per-head sinks; also K/V stores.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/kernels/kernels.h"
#include "backend/cpu/kernels/vec.h"

namespace rs::cpu {

void store_kv(const Tensor& k, const Tensor& v, Tensor k_cache, Tensor v_cache, const BatchView& batch) {
  const int64_t row_width = k_cache.dim(1) * k_cache.dim(2);
  RS_CHECK(k.dim(-1) * (k.ndim() == 3 ? k.dim(1) : 1) == row_width || k.numel() == k.dim(0) * row_width,
           "store_kv: k {} does not match cache rows of {}", k.shape_string(), row_width);
  RS_CHECK(k_cache.dtype() == DType::kF32, "CPU KV cache must be f32");
  const int32_t* slots = batch.kv_slots.data_as<int32_t>();
  for (int64_t t = 0; t < k.dim(0); ++t) {
    if (slots[t] < 0) continue;
    RS_DCHECK(slots[t] < k_cache.dim(0), "kv slot {} out of range", slots[t]);
    std::memcpy(k_cache.data_as<float>() + slots[t] * row_width, k.data_as<float>() + t * row_width,
                row_width * sizeof(float));
    std::memcpy(v_cache.data_as<float>() + slots[t] * row_width, v.data_as<float>() + t * row_width,
                row_width * sizeof(float));
  }
}

void attention(ThreadPool& pool, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache, const BatchView& batch,
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
  const float* kc = k_cache.data_as<float>();
  const float* vc = v_cache.data_as<float>();
  // Causal work grows with the position, so item i pairs token u/2 with token T-1-u/2 (u = i / heads): each thread's
  // contiguous range of items then holds as many long rows as short ones.
  pool.parallel_for(num_tokens * heads, [&](int64_t begin, int64_t end) {
    std::vector<float> scores;
    std::vector<int64_t> rows;
    std::vector<float> acc(hd);
    for (int64_t item = begin; item < end; ++item) {
      const int64_t u = item / heads;
      const int64_t t = u % 2 == 0 ? u / 2 : num_tokens - 1 - u / 2;
      const int32_t h = static_cast<int32_t>(item % heads);
      const int32_t kvh = h / group;
      const int32_t pos = positions[t];
      const int32_t first = params.window > 0 ? std::max(0, pos - params.window + 1) : 0;
      const int32_t* pages = page_table + token_seq[t] * max_pages;
      const float* qv = q.data_as<float>() + (t * heads + h) * hd;
      const int32_t count = pos - first + 1;
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
        const float s = dot_f32(qv, kc + rows[j] * hd, hd) * params.scale;
        scores[j] = s;
        max_score = std::max(max_score, s);
      }
      exp_shifted_f32(scores.data(), max_score, scores.data(), count);
      float denom = sinks.empty() ? 0.0f : std::exp(sinks[h] - max_score);
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int32_t j = 0; j < count; ++j) {
        denom += scores[j];
        axpy_f32(scores[j], vc + rows[j] * hd, acc.data(), hd);
      }
      float* o = out.data_as<float>() + (t * heads + h) * hd;
      const float inv = 1.0f / denom;
      for (int32_t d = 0; d < hd; ++d) o[d] = acc[d] * inv;
    }
  });
}

}  // namespace rs::cpu
