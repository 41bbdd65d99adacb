// Row-wise and elementwise CPU kernels: embedding lookup, RMSNorm (plain and gated), residual add, SiLU- and
// sigmoid-gated products, row gather.
#include <cmath>
#include <cstring>

#include "backend/cpu/kernels/kernels.h"
#include "backend/cpu/kernels/vec.h"

namespace rs::cpu {

void embedding(ThreadPool& pool, const Tensor& table, const Tensor& ids, Tensor out, int64_t first_id, int64_t vocab) {
  const int64_t hidden = table.dim(1), rows = table.dim(0);
  if (vocab < 0) vocab = rows;
  const int32_t* id = ids.data_as<int32_t>();
  for (int64_t t = 0; t < ids.numel(); ++t)
    RS_CHECK(id[t] >= 0 && id[t] < vocab, "token id {} outside the vocabulary of {}", id[t], vocab);
  pool.parallel_for(ids.numel(), [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      float* row = out.data_as<float>() + t * hidden;
      if (id[t] >= first_id && id[t] < first_id + rows)
        load_row(table, id[t] - first_id, row, hidden);
      else
        std::fill(row, row + hidden, 0.0f);
    }
  });
}

void rms_norm(ThreadPool& pool, const Tensor& x, const Tensor& weight, float eps, bool add_one, Tensor out) {
  const int64_t width = x.dim(-1);
  RS_CHECK(weight.numel() == width, "rms_norm weight {} does not match width {}", weight.shape_string(), width);
  std::vector<float> w(width);
  load_row(weight.view({1, width}), 0, w.data(), width);
  if (add_one)
    for (auto& v : w) v += 1.0f;
  pool.parallel_for(
      x.rows(),
      [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
          const float* in = x.data_as<float>() + r * width;
          float* o = out.data_as<float>() + r * width;
          double sum = 0.0;
          for (int64_t i = 0; i < width; ++i) sum += static_cast<double>(in[i]) * in[i];
          const float scale = 1.0f / std::sqrt(static_cast<float>(sum / width) + eps);
          for (int64_t i = 0; i < width; ++i) o[i] = in[i] * scale * w[i];
        }
      },
      4);
}

void add(ThreadPool& pool, const Tensor& a, const Tensor& b, Tensor out) {
  RS_CHECK(a.numel() == b.numel() && a.numel() == out.numel(), "add: shapes {} {} {}", a.shape_string(),
           b.shape_string(), out.shape_string());
  const float* pa = a.data_as<float>();
  const float* pb = b.data_as<float>();
  float* po = out.data_as<float>();
  pool.parallel_for(
      a.numel(),
      [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) po[i] = pa[i] + pb[i];
      },
      4096);
}

void silu_mul(ThreadPool& pool, const Tensor& gate_up, Tensor out) {
  const int64_t inter = out.dim(-1);
  RS_CHECK(gate_up.dim(-1) == 2 * inter, "silu_mul: {} -> {}", gate_up.shape_string(), out.shape_string());
  pool.parallel_for(out.rows(), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* g = gate_up.data_as<float>() + r * 2 * inter;
      const float* u = g + inter;
      float* o = out.data_as<float>() + r * inter;
      int64_t i = 0;
#if defined(__AVX512F__)
      for (; i + 16 <= inter; i += 16) {
        const __m512 gv = _mm512_loadu_ps(g + i);
        const __m512 e = exp_f32x16(_mm512_sub_ps(_mm512_setzero_ps(), gv));
        _mm512_storeu_ps(
            o + i, _mm512_mul_ps(_mm512_div_ps(gv, _mm512_add_ps(_mm512_set1_ps(1.0f), e)), _mm512_loadu_ps(u + i)));
      }
#endif
      for (; i < inter; ++i) o[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
    }
  });
}

void gather_rows(const Tensor& x, const Tensor& rows, Tensor out) {
  const int64_t width = x.dim(-1);
  const int32_t* row = rows.data_as<int32_t>();
  for (int64_t r = 0; r < rows.numel(); ++r) {
    RS_DCHECK(row[r] >= 0 && row[r] < x.rows(), "gather row {} out of range", row[r]);
    std::memcpy(out.data_as<float>() + r * width, x.data_as<float>() + row[r] * width, width * sizeof(float));
  }
}

void scatter_rows(const Tensor& x, const Tensor& rows, Tensor out, int64_t column) {
  const int64_t width = x.dim(-1), out_width = out.dim(-1);
  const int32_t* row = rows.data_as<int32_t>();
  for (int64_t t = 0; t < rows.numel(); ++t) {
    if (row[t] < 0) continue;
    RS_DCHECK(row[t] < out.rows(), "scatter row {} out of range", row[t]);
    std::memcpy(out.data_as<float>() + row[t] * out_width + column, x.data_as<float>() + t * width,
                width * sizeof(float));
  }
}

void gated_rms_norm(ThreadPool& pool, const Tensor& x, const Tensor& z, const Tensor& weight, float eps, Tensor out) {
  const int64_t width = x.dim(-1);
  RS_CHECK(weight.numel() == width && z.numel() == x.numel() && out.numel() == x.numel(),
           "gated_rms_norm: x {}, z {}, weight {}", x.shape_string(), z.shape_string(), weight.shape_string());
  std::vector<float> w(width);
  load_row(weight.view({1, width}), 0, w.data(), width);
  pool.parallel_for(x.rows(), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* in = x.data_as<float>() + r * width;
      const float* gate = z.data_as<float>() + r * width;
      float* o = out.data_as<float>() + r * width;
      float sum = 0.0f;
      for (int64_t i = 0; i < width; ++i) sum += in[i] * in[i];
      const float scale = 1.0f / std::sqrt(sum / width + eps);
      for (int64_t i = 0; i < width; ++i) o[i] = in[i] * scale * w[i] * (gate[i] / (1.0f + std::exp(-gate[i])));
    }
  });
}

void sigmoid_mul(ThreadPool& pool, const Tensor& x, const Tensor& gate, Tensor out) {
  const int64_t width = x.dim(-1), rows = x.rows();
  const int64_t gate_width = gate.dim(-1);
  RS_CHECK(gate.rows() == rows && (gate_width == width || gate_width == 1) && out.numel() == x.numel(),
           "sigmoid_mul: x {}, gate {}", x.shape_string(), gate.shape_string());
  pool.parallel_for(rows, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* in = x.data_as<float>() + r * width;
      const float* g = gate.data_as<float>() + r * gate_width;
      float* o = out.data_as<float>() + r * width;
      for (int64_t i = 0; i < width; ++i) o[i] = in[i] / (1.0f + std::exp(-g[gate_width == 1 ? 0 : i]));
    }
  });
}

}  // namespace rs::cpu
