// Batch invariance of the CUDA backend with BackendOptions::deterministic (--enable-deterministic-inference): a row's
// result must be bit-identical whatever else shares its call. Linear layers: a row alone, in a few rows, at any offset
// of a 64-row chunk, or among 100. Attention: a (sequence, position) row computed in a whole-prompt prefill, a prefill
// chunk, a decode step alone, or a mixed step beside other sequences' chunks and decode rows; windows and sinks; the
// tensor-core kernel (bf16 cache) and the CUDA-core one (f32 cache). Without the option the same comparisons differ
// (GEMV vs cuBLAS, key splits, decode tiles): the attention test counts and prints those differences for the default
// backend, to show what the flag prevents.
#include <map>
#include <numeric>
#include <utility>

#include "backend/cuda/parity_test_util.h"

namespace rs::cuda_test {
namespace {

// Number of elements whose bits differ (0 = identical; NaNs compare by bits too).
size_t bit_mismatches(const float* a, const float* b, size_t n) {
  size_t count = 0;
  for (size_t i = 0; i < n; ++i) count += std::memcmp(a + i, b + i, sizeof(float)) != 0;
  return count;
}

class BatchInvariance : public CudaParity {
 protected:
  void SetUp() override {
    CudaParity::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    det_ = make_backend("cuda", BackendOptions{.deterministic = true});
    det_exact_ = make_backend("cuda", BackendOptions{.exact_f32 = true, .deterministic = true});
  }
  // Runs `op` on `backend` after the uploads (made on gpu_'s stream) and waits for it.
  template <typename Op>
  void run_on(Backend& backend, Op&& op) {
    gpu_->synchronize();
    op(backend);
    backend.synchronize();
  }

  std::unique_ptr<Backend> det_, det_exact_;
};

TEST_F(BatchInvariance, LinearRowsDoNotDependOnTheirNeighbours) {
  const int64_t in = 256, out_features = 384, rows = 100, inter = 160;
  const Tensor x = dev(host(normal(rng_, rows * in), DType::kF32, {rows, in}));
  const Tensor bias = dev(host(normal(rng_, out_features, 0.1f), DType::kF32, {out_features}));
  const std::pair<int64_t, int64_t> parts[] = {{0, 1}, {0, 2}, {0, 3}, {0, 8}, {5, 37}, {50, 3}, {63, 2}, {99, 1}};
  for (const DType dtype : {DType::kBF16, DType::kF32}) {
    const auto values = normal(rng_, out_features * in, 0.05f);
    const auto gate_up_values = normal(rng_, 2 * inter * in, 0.05f);
    const Tensor w_host = dtype == DType::kBF16 ? host(to_bf16(values), dtype, {out_features, in})
                                                : host(values, dtype, {out_features, in});
    const Tensor gu_host = dtype == DType::kBF16 ? host(to_bf16(gate_up_values), dtype, {2 * inter, in})
                                                 : host(gate_up_values, dtype, {2 * inter, in});
    const LinearWeight w = dev_weight(LinearWeight{LinearWeight::Format::kDense, w_host, {}, out_features, in, {}});
    const LinearWeight gu = dev_weight(LinearWeight{LinearWeight::Format::kDense, gu_host, {}, 2 * inter, in, {}});
    // The default backend last: its differences are counted and printed, not failed.
    for (Backend* backend : {det_.get(), det_exact_.get(), fast_.get()}) {
      const bool invariant = backend != fast_.get();
      const std::string mode = fmt::format("{} weights, {}", dtype_name(dtype),
                                           backend == det_.get()         ? "fast"
                                           : backend == det_exact_.get() ? "exact"
                                                                         : "default backend, no flag");
      size_t parts_differ = 0;
      const auto expect_same = [&](const float* got, const float* want, size_t n, const std::string& what) {
        const size_t mismatches = bit_mismatches(got, want, n);
        if (invariant) {
          EXPECT_EQ(mismatches, 0u) << mode << ": " << what;
        }
        parts_differ += mismatches > 0;
      };
      const auto linear = [&](int64_t begin, int64_t count, bool with_bias) {
        Tensor out = dev(host_zeros(DType::kF32, {count, out_features}));
        run_on(*backend,
               [&](Backend& b) { b.linear(x.slice_rows(begin, begin + count), w, with_bias ? bias : Tensor(), out); });
        return fetch<float>(out);
      };
      const auto silu = [&](int64_t begin, int64_t count) {
        Tensor scratch = dev(host_zeros(DType::kF32, {count, 2 * inter}));
        Tensor out = dev(host_zeros(DType::kF32, {count, inter}));
        run_on(*backend, [&](Backend& b) { b.linear_silu_mul(x.slice_rows(begin, begin + count), gu, scratch, out); });
        return fetch<float>(out);
      };
      for (const bool with_bias : {false, true}) {
        const std::vector<float> full = linear(0, rows, with_bias);
        for (const auto& [begin, count] : parts) {
          const std::vector<float> part = linear(begin, count, with_bias);
          expect_same(part.data(), full.data() + begin * out_features, part.size(),
                      fmt::format("bias {}: rows [{}, {}) alone vs among {}", with_bias, begin, begin + count, rows));
        }
      }
      const std::vector<float> full = silu(0, rows);
      for (const auto& [begin, count] : parts) {
        const std::vector<float> part = silu(begin, count);
        expect_same(part.data(), full.data() + begin * inter, part.size(),
                    fmt::format("linear_silu_mul rows [{}, {})", begin, begin + count));
      }
      std::printf("  linear (%s): %zu of %zu row ranges differ from the same rows among %lld\n", mode.c_str(),
                  parts_differ, 3 * std::size(parts), static_cast<long long>(rows));
    }
  }
}

// One query row: sequence `seq`, tokens [first, first + count) of it in one step.
struct StepItem {
  int32_t seq, first, count;
};

TEST_F(BatchInvariance, AttentionRowsDoNotDependOnTheStep) {
  struct Shape {
    int32_t heads, kv_heads, head_dim;
  };
  const Shape shapes[] = {{32, 8, 128}, {16, 2, 256}, {64, 8, 64}, {4, 2, 80}};
  const std::vector<int32_t> lengths = {300, 170, 45};  // full lengths of three sequences
  // Steps mixing whole prompts, chunks (after prefixes ending mid-page and mid-tile), decode rows alone and decode
  // rows beside chunks; every (sequence, position) row present in several of them must come out identical.
  const std::vector<std::vector<StepItem>> steps = {
      {{0, 0, 300}},
      {{0, 299, 1}},
      {{1, 169, 1}, {0, 250, 50}, {2, 44, 1}},
      {{0, 120, 7}, {1, 0, 170}},
      {{2, 0, 45}, {0, 299, 1}, {1, 169, 1}},
      {{0, 64, 1}},
      {{0, 127, 2}},
      {{1, 100, 70}, {0, 64, 64}},
      {{2, 40, 5}, {0, 128, 1}, {0, 200, 1}},
  };
  const int32_t page_size = 16, seqs = static_cast<int32_t>(lengths.size());
  const int32_t max_pages = (300 + page_size - 1) / page_size;
  int32_t total_pages = 0;
  for (int32_t len : lengths) total_pages += (len + page_size - 1) / page_size;
  std::vector<int32_t> page_ids(total_pages);
  std::iota(page_ids.begin(), page_ids.end(), 0);
  std::shuffle(page_ids.begin(), page_ids.end(), rng_);
  std::vector<int32_t> table(seqs * max_pages, -1);
  for (int32_t s = 0, next = 0; s < seqs; ++s)
    for (int32_t p = 0; p < (lengths[s] + page_size - 1) / page_size; ++p) table[s * max_pages + p] = page_ids[next++];
  const auto slot_of = [&](int32_t seq, int32_t pos) {
    return table[seq * max_pages + pos / page_size] * page_size + pos % page_size;
  };

  for (const Shape& shape : shapes) {
    const int64_t q_width = int64_t{shape.heads} * shape.head_dim, kv_width = int64_t{shape.kv_heads} * shape.head_dim;
    // Every position's K, V and q, drawn once: a row's inputs are the same in every step.
    std::vector<std::vector<float>> q_rows(seqs);
    std::vector<int32_t> all_pos, all_seq, all_slots;
    for (int32_t s = 0; s < seqs; ++s) {
      q_rows[s] = normal(rng_, lengths[s] * q_width);
      for (int32_t p = 0; p < lengths[s]; ++p)
        all_pos.push_back(p), all_seq.push_back(s), all_slots.push_back(slot_of(s, p));
    }
    const int64_t all_tokens = all_pos.size(), cache_rows = int64_t{total_pages} * page_size;
    const Tensor k =
        dev(host(normal(rng_, all_tokens * kv_width), DType::kF32, {all_tokens, shape.kv_heads, shape.head_dim}));
    const Tensor v =
        dev(host(normal(rng_, all_tokens * kv_width), DType::kF32, {all_tokens, shape.kv_heads, shape.head_dim}));
    const Tensor sinks = dev(host(normal(rng_, shape.heads, 2.0f), DType::kF32, {shape.heads}));
    for (const DType cache_dtype : {DType::kBF16, DType::kF32, DType::kF8E4M3}) {
      Tensor kc = dev(host_zeros(cache_dtype, {cache_rows, shape.kv_heads, shape.head_dim}));
      Tensor vc = dev(host_zeros(cache_dtype, {cache_rows, shape.kv_heads, shape.head_dim}));
      const BatchView store{dev(host(all_pos, DType::kI32, {all_tokens})),
                            dev(host(all_seq, DType::kI32, {all_tokens})),
                            dev(host(lengths, DType::kI32, {seqs})),
                            dev(host(table, DType::kI32, {seqs, max_pages})),
                            dev(host(all_slots, DType::kI32, {all_tokens})),
                            page_size,
                            seqs,
                            300,
                            Tensor()};
      gpu_->store_kv(k, v, {kc, vc}, store);
      for (const int32_t window : {0, 100}) {
        for (const bool with_sinks : {false, true}) {
          const std::string what = fmt::format("h={}/{} hd={} cache={} window={} sinks={}", shape.heads, shape.kv_heads,
                                               shape.head_dim, dtype_name(cache_dtype), window, with_sinks);
          // (seq, pos) -> output row, for the deterministic backend and (informational) the default one
          std::map<std::pair<int32_t, int32_t>, std::vector<float>> seen, seen_default;
          size_t compared = 0, default_differ = 0;
          for (const auto& step : steps) {
            std::vector<int32_t> pos, tok_seq, kv_len, step_table, starts{0};
            std::vector<float> q;
            for (int32_t i = 0; i < static_cast<int32_t>(step.size()); ++i) {
              const StepItem& item = step[i];
              for (int32_t p = item.first; p < item.first + item.count; ++p) {
                pos.push_back(p), tok_seq.push_back(i);
                q.insert(q.end(), q_rows[item.seq].begin() + p * q_width, q_rows[item.seq].begin() + (p + 1) * q_width);
              }
              starts.push_back(static_cast<int32_t>(pos.size()));
              kv_len.push_back(item.first + item.count);
              step_table.insert(step_table.end(), table.begin() + item.seq * max_pages,
                                table.begin() + (item.seq + 1) * max_pages);
            }
            const int32_t tokens = static_cast<int32_t>(pos.size()), n = static_cast<int32_t>(step.size());
            const BatchView batch{dev(host(pos, DType::kI32, {tokens})),
                                  dev(host(tok_seq, DType::kI32, {tokens})),
                                  dev(host(kv_len, DType::kI32, {n})),
                                  dev(host(step_table, DType::kI32, {n, max_pages})),
                                  Tensor(),
                                  page_size,
                                  n,
                                  *std::max_element(kv_len.begin(), kv_len.end()),
                                  dev(host(starts, DType::kI32, {n + 1}))};
            const Tensor q_d = dev(host(q, DType::kF32, {tokens, shape.heads, shape.head_dim}));
            Tensor out = dev(host_zeros(DType::kF32, {tokens, q_width}));
            const AttentionParams params{shape.heads,    shape.kv_heads,
                                         shape.head_dim, 1.0f / std::sqrt(float(shape.head_dim)),
                                         window,         with_sinks ? sinks : Tensor()};
            run_on(*det_, [&](Backend& b) { b.attention(q_d, {kc, vc}, batch, params, out); });
            const std::vector<float> rows = fetch<float>(out);
            run_on(*fast_, [&](Backend& b) { b.attention(q_d, {kc, vc}, batch, params, out); });
            const std::vector<float> default_rows = fetch<float>(out);
            for (int32_t t = 0; t < tokens; ++t) {
              const auto key = std::make_pair(step[tok_seq[t]].seq, pos[t]);
              const float* row = rows.data() + t * q_width;
              const float* default_row = default_rows.data() + t * q_width;
              const auto [it, inserted] = seen.try_emplace(key, row, row + q_width);
              const auto default_it = seen_default.try_emplace(key, default_row, default_row + q_width).first;
              if (inserted) continue;
              ++compared;
              EXPECT_EQ(bit_mismatches(row, it->second.data(), q_width), 0u)
                  << what << ": sequence " << key.first << " position " << key.second << " differs between steps";
              default_differ += bit_mismatches(default_row, default_it->second.data(), q_width) > 0;
            }
          }
          EXPECT_EQ(compared, 206u) << what << ": rows that appear in more than one step";
          std::printf("  attention %s: %zu repeated rows identical (without the flag %zu of them differ)\n",
                      what.c_str(), compared, default_differ);
        }
      }
    }
  }
}

}  // namespace
}  // namespace rs::cuda_test
