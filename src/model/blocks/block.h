// The two halves of a decoder layer (MODELS.md §1.0): a token mixer (attention over paged K/V, or a gated delta net
// over a recurrent-state slot) and a feed-forward (a dense SwiGLU MLP, or a mixture of experts with an optional
// shared expert). Each block owns its weights (loaded by its own factory through a WeightBuilder), lists them once
// for upload and backend preparation (visit), states the activation scratch it needs, and runs; the model dispatches
// once per layer and knows no block's fields. A quantized format is a LinearWeight kind, so no block changes for one.
#pragma once

#include <algorithm>
#include <cstdint>

#include "backend/backend.h"
#include "model/model.h"

namespace rs::model {

// What a block's weights are visited for (uploading them to the device, preparing them for the backend).
class WeightVisitor {
 public:
  virtual ~WeightVisitor() = default;
  virtual void tensor(Tensor& t) = 0;
  // `projection`: a weight the backend may repack for its GEMM (not routers and one-row gates, read as stored).
  virtual void linear(LinearWeight& w, bool projection) = 0;
  virtual void experts(MoeWeights& experts) = 0;
};

// Activation scratch a block needs: `floats` f32 values per token of the step, in at most `buffers` pieces.
struct ScratchNeed {
  int64_t floats = 0;
  int buffers = 0;
  // Scratch enough for either (blocks run one after another and reuse it).
  ScratchNeed covering(const ScratchNeed& other) const {
    return {std::max(floats, other.floats), std::max(buffers, other.buffers)};
  }
};

// A step's scratch memory, handed out in 256-byte-aligned pieces (kernels read rows with 16-byte vector loads, and
// a piece after an odd-sized one would be misaligned). Each block takes from the start again.
class Scratch {
 public:
  static constexpr size_t kAlign = 256;
  Scratch(void* base, size_t bytes, Device device) : base_(static_cast<char*>(base)), bytes_(bytes), device_(device) {}
  // Bytes to reserve for `need` at `tokens` tokens.
  static size_t bytes_for(const ScratchNeed& need, int64_t tokens) {
    return static_cast<size_t>(tokens * need.floats) * sizeof(float) + static_cast<size_t>(need.buffers) * kAlign;
  }
  Tensor take(DType dtype, std::initializer_list<int64_t> shape);
  void reset() { used_ = 0; }

 private:
  char* base_;
  size_t bytes_;
  Device device_;
  size_t used_ = 0;
};

// What a block runs with: the step, its memory and the layer's index (blocks of one kind share code over layers).
struct LayerStep {
  int32_t layer = 0;
  const StepInputs& inputs;
  StepMemory& memory;
  Backend& backend;
  Scratch& scratch;
};

// What both halves of a layer are.
class Block {
 public:
  virtual ~Block() = default;
  virtual void visit(WeightVisitor& visitor) = 0;
  virtual ScratchNeed scratch_need() const = 0;
  // Whether the normed input may come in the backend's linear_input_dtype (it feeds only dense bf16 projections).
  virtual bool takes_typed_input() const = 0;
  // h [T, H] (the normed layer input) -> out [T, H] f32.
  virtual void run(const LayerStep& step, const Tensor& h, Tensor out) = 0;
};

class TokenMixer : public Block {
 public:
  // The checkpoint's FP8 KV cache scales of this layer, or {0, 0}.
  virtual Model::KvScales kv_scales() const { return {}; }
};

class FeedForward : public Block {};

// Whether `w` is a dense bf16 weight (the layers' inputs may then be typed: Backend::linear_input_dtype).
inline bool is_dense_bf16(const LinearWeight& w) {
  return w.format == LinearWeight::Format::kDense && w.weight.dtype() == DType::kBF16;
}

}  // namespace rs::model
