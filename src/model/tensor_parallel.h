// Tensor parallelism of one model over `size` ranks (issue 41): each rank a DecoderModel built from its share of the
// config (rank_config) and loaded from WeightSource::sharded; column-parallel q/k/v/gate/up, row-parallel o/down
// whose outputs the ranks sum, the embedding split by vocabulary (lookups summed), the LM head split by vocabulary
// and gathered on rank 0. Here the ranks are threads of
// this process on CPU backends of their own and the sums an in-process all-reduce (make_in_process_group): the
// sharding math, proven on CPUs, that a multi-GPU build runs over NCCL.
#pragma once

#include <memory>
#include <vector>

#include "backend/communicator.h"
#include "model/model.h"

namespace rs::model {

// Rank `rank`'s config: its share of the attention heads (whole KV heads, replicated where there are fewer than
// ranks), of the gated delta nets' key and value heads, of the MLP, expert and shared-expert widths. Refuses, with the
// reason, what tensor parallelism does not split yet (EAGLE-3 heads, embedding models; the loader refuses act-order
// GPTQ and groups or blocks a rank would cut).
// expert_parallel: MoE experts stay whole, a block of them per rank (their width unsplit).
loader::ModelConfig rank_config(const loader::ModelConfig& config, int32_t rank, int32_t size,
                                bool expert_parallel = false);

class TensorParallelModel : public Model {
 public:
  // Rank 0 runs on the backend load() is given; ranks 1..size-1 on CPU backends of their own (`rank_options`).
  TensorParallelModel(const loader::ModelConfig& config, int32_t size, const BackendOptions& rank_options,
                      bool expert_parallel = false);
  ~TensorParallelModel() override;

  int32_t size() const { return static_cast<int32_t>(ranks_.size()); }
  // The device of rank r >= 1 (after load()), where its KV pool goes; the engine hands its memory back through
  // set_rank_memory (rank 0's is forward()'s).
  Backend& rank_backend(int32_t rank) { return *ranks_[rank].backend; }
  void set_rank_memory(int32_t rank, StepMemory memory);
  // Bytes of weights every rank holds, together.
  size_t bytes_loaded() const;

  void load(loader::WeightSource& weights, Backend& backend, const ProgressFn& progress) override;
  void reserve(int64_t max_tokens) override;
  // Runs every rank's forward (rank 0 on this thread), the all-reduces joining them; rank 0 writes the logits. A rank
  // that fails aborts the group: the others' collectives throw, and the first error is rethrown here.
  void forward(const StepInputs& inputs, StepMemory& memory, Tensor logits) override;
  std::vector<KvScales> kv_cache_scales() const override { return ranks_[0].model->kv_cache_scales(); }

 private:
  struct Rank {
    std::unique_ptr<Communicator> comm;
    std::unique_ptr<Backend> backend;               // ranks >= 1
    std::unique_ptr<loader::WeightSource> weights;  // the rank's shard of the checkpoint, which its model views
    std::unique_ptr<Model> model;
    std::unique_ptr<StepMemory> memory;  // ranks >= 1
  };
  BackendOptions rank_options_;
  loader::ModelConfig whole_;  // the unsplit model's
  bool expert_parallel_ = false;
  std::vector<Rank> ranks_;
};

}  // namespace rs::model
