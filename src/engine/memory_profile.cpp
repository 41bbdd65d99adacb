// Engine::profile_memory: the steps that size the backend's scratch, run before the KV pool is sized.
#include <algorithm>

#include "base/log.h"
#include "engine/engine.h"
#include "engine/step_builder.h"
#include "engine/step_staging.h"

namespace rs::engine {

void Engine::profile_memory(const memory::KvPoolConfig& kv_config, const memory::StateGeometry& state_geometry) {
  // On a pool of one page per group (and one state slot), every token at position 0 of that page: the largest step
  // (one prefill of reserved_tokens_), a sampled decode step of --max-running-requests sequences and one of a single
  // sequence, planned for the context length as graphs are. The backend's scratch (GEMM inputs, MoE buffers,
  // attention splits, sampling) grows to its final size here and stays allocated, so the KV budget measured after
  // this is what no later step takes away: a full pool cannot run the device out.
  memory::KvPoolConfig tiny = kv_config;
  for (memory::KvGroup& group : tiny.groups) group.num_pages = 1;
  kv_pool_ = std::make_unique<memory::KvPool>(*backend_, tiny);
  state_pool_ = std::make_unique<memory::StatePool>(*backend_, state_geometry, state_geometry.empty() ? 0 : 1);
  memory_ = std::make_unique<model::StepMemory>(
      model::StepMemory{*kv_pool_, state_pool_->num_slots() > 0 ? state_pool_.get() : nullptr});
  staging_ = std::make_unique<StepStaging>(*backend_, *kv_pool_, context_length_);
  const int32_t seqs = std::max(config_.max_running_requests, 1);
  staging_->reserve(static_cast<int32_t>(reserved_tokens_), seqs, seqs);
  const int32_t slot = state_pool_->num_slots() > 0 ? 0 : -1;
  const std::vector<std::vector<int32_t>> pages(kv_pool_->num_groups(), std::vector<int32_t>{0});
  const size_t free_before = backend_->memory_info().free_bytes;
  profiling_ = true;  // steps plan attention for the context length, as graphs do (the split scratch's full size)

  // The largest step: one sequence of reserved_tokens_ tokens, all at position 0 (each reads the one key of page 0).
  const SamplingParams greedy{.temperature = 0.0f};
  const std::vector<int32_t> prompt(static_cast<size_t>(reserved_tokens_), 0);
  StepBuilder prefill(kv_pool_->num_groups());
  prefill.add_sequence(prompt, 0, pages, slot);
  prefill.add_logit_row(prefill.num_tokens() - 1, SamplingRow{.params = &greedy});
  ForwardBatch largest = prefill.finish();
  std::fill(largest.positions.begin(), largest.positions.end(), 0);
  largest.seq_kv_len.assign(1, 1);
  forward(largest);
  // Decode steps: the widest (sampling's scratch) and a single sequence, whose few attention blocks split their keys
  // over the context length (the split scratch's fixed bound).
  for (const int32_t batch_size : {seqs, 1}) {
    if (model_config_.embedding) break;
    const int32_t token = 0;
    StepBuilder decode(kv_pool_->num_groups());
    for (int32_t s = 0; s < batch_size; ++s) {
      decode.add_sequence(std::span(&token, 1), 0, pages, slot);
      decode.add_logit_row(s, SamplingRow{.params = &greedy});
    }
    forward(decode.finish());
  }
  backend_->synchronize();
  profiling_ = false;
  const size_t free_after = backend_->memory_info().free_bytes;
  RS_LOG_INFO("memory profile: a {}-token step and a {}-sequence decode step hold {:.2f} GiB of scratch",
              reserved_tokens_, seqs, free_before > free_after ? (free_before - free_after) / double(1 << 30) : 0.0);
  staging_.reset();
  memory_.reset();
  state_pool_.reset();
  kv_pool_.reset();
}

}  // namespace rs::engine
