// Model: the architecture seam. A model loads its weights from a WeightSource and runs one batched forward step.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "loader/hf_config.h"
#include "loader/weight_source.h"
#include "memory/kv_pool.h"
#include "memory/state_pool.h"

namespace rs::model {

using ProgressFn = std::function<void(const std::string& what, double fraction)>;

// Hidden-state taps of an EAGLE-3 target: the residual stream at the entry of each of `layers` (the layer count:
// after the last layer) goes into row kv_slot (of KV group `group`) of `cache` f32 [slots, layers.size() * hidden],
// one column block per layer, for every token of every step, for a draft head to read.
struct HiddenTaps {
  std::vector<int32_t> layers;
  Tensor cache;
  int32_t group = 0;
};

// Device-side inputs of one step, prepared by the engine.
struct StepInputs {
  Tensor token_ids;               // i32 [T]
  Tensor logit_rows;              // i32 [R]
  std::vector<BatchView> groups;  // one per KV group (same positions/token_seq; own page table and slots)
  StateBatchView state;           // state slot of each sequence (-1 everywhere for models without recurrent layers)
  // EAGLE-3 draft heads: per token, the row of the target's feature cache (features_from_target) or of the head's own
  // output of the previous step that feeds it; empty for other models.
  Tensor feature_rows;  // i32 [T], or [C] with feature_tokens
  bool features_from_target = true;
  // DFlash drafters: the step row of each feature row (i32 [C], C <= T: the context rows); empty for EAGLE-3.
  Tensor feature_tokens;
  const HiddenTaps* taps = nullptr;  // EAGLE-3 targets: the layers to write out (null: none)
};

// The device memory a step reads and writes, one part per layer kind: paged K/V for attention layers and
// recurrent-state slots for gated-delta-net layers (nullptr when the model has none).
struct StepMemory {
  memory::KvPool& kv;
  memory::StatePool* state = nullptr;
};

// What a target model lends a draft head: its token embedding table [vocab, hidden] (empty where it has none or the
// checkpoint quantizes it) and its LM head prepared for the backend (null where it has none).
struct SharedWeights {
  Tensor embedding;
  const LinearWeight* head = nullptr;
};

// A draft head for speculative decoding (EAGLE-3): it reads its target's hidden-state taps and shares its weights.
class DraftHead {
 public:
  virtual ~DraftHead() = default;
  // Binds the target's weights and its feature cache (HiddenTaps::cache) before the head's first step.
  virtual void bind_target(const SharedWeights& target, const Tensor& features) = 0;
  // The target's token id of each of the head's logit columns (empty: the identity).
  virtual std::vector<int32_t> draft_to_target() const = 0;
};

class Model {
 public:
  virtual ~Model() = default;
  // Reads every weight (validating shapes against config.json) and moves them to the backend's device.
  virtual void load(loader::WeightSource& weights, Backend& backend, const ProgressFn& progress) = 0;
  // Sizes activation memory for steps of up to `max_tokens` tokens. forward() of a larger step grows it, which moves
  // it (a recorded graph then reads freed memory), so the engine reserves for its largest step up front.
  virtual void reserve(int64_t max_tokens) = 0;
  // Runs the decoder over the step's tokens, storing K/V and recurrent state in `memory`, and writes f32 logits
  // [R, vocab] into `logits`.
  // Issues backend ops only (no host synchronisation, no allocation within the reserved size), so it can be recorded
  // into a graph.
  virtual void forward(const StepInputs& inputs, StepMemory& memory, Tensor logits) = 0;
  // Per-tensor K and V scales of an FP8 KV cache that the checkpoint gives (k_scale / v_scale of its attention
  // layers), indexed by layer; entries of layers without them (and all, for checkpoints without any) are {0, 0}.
  struct KvScales {
    float k = 0.0f, v = 0.0f;
  };
  virtual std::vector<KvScales> kv_cache_scales() const { return {}; }

  // ---- speculative decoding (a target's hidden-state taps come in StepInputs::taps) ----
  // What this model lends a draft head.
  virtual SharedWeights shared_weights() const { return {}; }
  // This model as a draft head, or null for a model that is not one.
  virtual DraftHead* draft_head() { return nullptr; }
};

// Creates the model for config.architecture (see registry.cpp); the error lists the supported architectures.
std::unique_ptr<Model> create_model(const loader::ModelConfig& config);
std::vector<std::string> supported_architectures();

}  // namespace rs::model
