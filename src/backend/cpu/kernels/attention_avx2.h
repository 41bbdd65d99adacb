// Paged attention on x86 CPUs without AVX-512 (AVX2 + FMA; or any x86 CPU under RS_CPU_KERNELS=avx2): the blocked
// online-softmax kernel of attention.cpp in 8-lane vectors. One call is one work item - query rows of tokens [t0, t1)
// of one sequence x the query heads of KV head `kvh` - over keys in blocks of 32 aligned to absolute positions, each
// block's K/V rows widened to f32 once for all the item's rows (the row-wise fallback widened them per query row, and
// twice). Products and sums are f32 on the stored values (a bf16 cache's values exactly, an fp8 code times its
// scale). A row's arithmetic depends on its query and its keys only, not on the item's other rows: batch-invariant.
#pragma once

#include <cstdint>

#include "backend/backend.h"

namespace rs::cpu {

// The last key token t attends to: its own position, or without causality its sequence's last key.
inline int32_t last_key(const BatchView& batch, const AttentionParams& params, int64_t t) {
  if (params.causal) return batch.positions.data_as<int32_t>()[t];
  return batch.seq_kv_len.data_as<int32_t>()[batch.token_seq.data_as<int32_t>()[t]] - 1;
}

// Whether this CPU runs the kernel for `head_dim` (a multiple of 8, at most 256).
bool avx2_attention_supports(int32_t head_dim);

// out[token, head] for the item's rows; `sinks` ([num_heads]) or null.
void avx2_attend_item(const Tensor& q, const KvCache& cache, const BatchView& batch, const AttentionParams& params,
                      const float* sinks, int64_t t0, int64_t t1, int32_t kvh, float* out);

}  // namespace rs::cpu
