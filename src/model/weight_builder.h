// WeightBuilder: what a model and its blocks load weights with. It turns a checkpoint's tensors into LinearWeight
// handles of whatever format the checkpoint stores (through LinearLoader), fuses and selects rows, and keeps every
// host buffer it makes for the model's life. A quantized format arrives in LinearLoader and the backend; blocks only
// ask for a projection by name.
#pragma once

#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/communicator.h"
#include "loader/hf_config.h"
#include "loader/weight_source.h"
#include "model/linear_loader.h"

namespace rs::model {

class WeightBuilder {
 public:
  // `owned` keeps every buffer made here. `comm` (or null): the rank's group of tensor parallelism, and with
  // `expert_parallel` each rank holds a block of whole experts.
  WeightBuilder(const loader::ModelConfig& config, loader::WeightSource& weights, Backend& backend,
                std::vector<Buffer>& owned, Communicator* comm = nullptr, bool expert_parallel = false);

  loader::WeightSource& source() { return weights_; }
  Backend& backend() { return backend_; }
  std::vector<Buffer>& owned() { return owned_; }
  LinearLoader& linears() { return linears_; }

  // The linear `name` ("...q_proj.weight") in whatever format the checkpoint stores it (see LinearLoader);
  // `quantizable`: whether --quantization may quantize it (false for routers and one-row gates).
  LinearWeight dense(const std::string& name, int64_t out, int64_t in, bool quantizable = true);
  // The experts of `count` this model holds: all, or with expert parallelism the rank's block. MoE loaders load
  // these (expert() takes global indices) and record them in MoeWeights::first_expert / total_experts.
  struct ExpertRange {
    int32_t first = 0, count = 0;
  };
  ExpertRange local_experts(int32_t count) const;
  // Projection `proj` ("gate_proj") of expert `e` of `count` in the MoE block at `mlp` ("...mlp."): per-expert modules
  // (mlp.experts.{e}.gate_proj, Hugging Face) or one stacked module (mlp.switch_mlp.gate_proj, mlx_lm).
  LinearWeight expert(const std::string& mlp, int64_t e, int64_t count, const std::string& proj, int64_t out,
                      int64_t in);
  // Stacks the rows of weights of one format into a new [sum rows, in] weight (owned here), already prepared for the
  // backend (a repacking backend keeps only its packed copy of a dense weight).
  LinearWeight concat(std::initializer_list<LinearWeight> parts);
  LinearWeight concat(std::span<const LinearWeight> parts);
  // concat() of dense [rows_i, in] tensors.
  LinearWeight concat_rows(std::initializer_list<Tensor> parts);
  // The given rows of `w`, in that order.
  LinearWeight select_rows(const LinearWeight& w, const std::vector<int64_t>& rows) {
    return linears_.select_rows(w, rows);
  }
  // Frees owned buffers that only `garbage` (weights consumed by a fusion or row selection) or buffers made at or
  // after index `from` reference, keeping every buffer `kept` reads.
  void release_unused(size_t from, std::span<const LinearWeight> garbage, const LinearWeight& kept);
  // Stores a host buffer for the model's lifetime and returns a view of it.
  Tensor keep(Buffer buffer, DType dtype, std::vector<int64_t> shape);
  // A host f32 copy of `t` (any float dtype), owned here, plus `offset` on every element.
  Tensor to_f32(const Tensor& t, float offset = 0.0f);
  // An RMSNorm weight [width]: as stored, or as (1 + w) in f32 for zero-centred norms stored unshifted.
  Tensor norm_weight(const std::string& name, int64_t width);
  // Zero-centred (1 + w) RMSNorms (Qwen3-Next, Qwen3.5), and whether the checkpoint stores them with the 1 added
  // (mlx_lm's layout): set by the model before its norms load.
  bool zero_centered_norm = false;
  bool norms_stored_shifted = false;

 private:
  const loader::ModelConfig& config_;
  loader::WeightSource& weights_;
  Backend& backend_;
  std::vector<Buffer>& owned_;
  LinearLoader linears_;
  Communicator* comm_;
  bool expert_parallel_;
};

}  // namespace rs::model
