// WeightSource: where a model's tensors come from — a checkpoint (safetensors or pytorch_model.bin), or seeded dummy
// values (--load-format dummy).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "loader/checkpoint.h"
#include "tensor/buffer.h"

namespace rs {
class ThreadPool;
}

namespace rs::loader {

class WeightSource {
 public:
  // Reads the checkpoint in model_dir.
  static WeightSource checkpoint(const std::filesystem::path& model_dir);
  // Fabricates any requested tensor with seeded random values of sensible scale in `dtype`. `layout`: name suffixes
  // the source answers contains() for, so that a model picks the layout of the release it stands for (dummy_layout()
  // derives them from the config) without knowing that its weights are dummy.
  static WeightSource dummy(uint64_t seed, DType dtype, std::vector<std::string> layout = {});

  // Whether the tensor exists (a dummy source: whether its name ends with one of its layout suffixes).
  bool contains(const std::string& name) const;
  // The stored dtype and shape of a tensor, without loading it; nullopt when absent (always, for dummy sources).
  struct TensorInfo {
    DType dtype;
    std::vector<int64_t> shape;
  };
  std::optional<TensorInfo> info(const std::string& name) const;
  // The tensor `name`, checked against `shape`; float tensors may be f32/bf16/f16 unless `dtype` pins one.
  // Errors name the file and the tensor.
  Tensor require(const std::string& name, std::initializer_list<int64_t> shape, std::optional<DType> dtype = {});
  Tensor require(const std::string& name, const std::vector<int64_t>& shape, std::optional<DType> dtype = {});
  bool is_dummy() const { return checkpoint_ == nullptr; }

  // Tensor parallelism (issue 41): rank `rank` of `size` reads its shard of each projection, by the tensor's name:
  // q_proj, gate_proj, up_proj (experts' and shared experts' too), sinks, lm_head and embed_tokens by output rows
  // (block `rank` of `size`); k_proj and v_proj by whole KV heads (each rank's head, replicated when there are fewer
  // heads than ranks); o_proj and down_proj by input columns; gpt-oss's stacked experts along their intermediate axis;
  // the biases of o/down projections on rank 0 alone (zeros elsewhere: the all-reduce adds them once); integer
  // weights' scales and biases as their codes; everything else whole. require() and info() take and give the rank's
  // shape.
  // Gated delta nets split by key heads (each with its value heads): the fused projections are grouped per key head
  // (rows in blocks), Qwen3.5's in_proj_qkv and the conv's channels are q | k | v sections (each section in blocks).
  struct Shard {
    int32_t rank = 0, size = 1;
    int32_t num_kv_heads = 0;                          // the whole model's
    int64_t linear_key_dim = 0, linear_value_dim = 0;  // the whole model's gated-delta-net q/k and v widths
    bool in_major = false;         // AWQ / GPTQ: qweight, qzeros, scales and g_idx are stored input-major
    bool gpt_oss_experts = false;  // stacked experts.* in gpt-oss's layout (else Qwen3.5-MoE's)
    bool expert_parallel = false;  // MoE experts whole, a block of them per rank (else each split by width)
  };
  // A source reading the same checkpoint (or dummy values: the same ones at every size) as rank `shard.rank`.
  WeightSource sharded(const Shard& shard) const;
  const Shard& shard() const { return shard_; }
  // For a model whose weights now live on a device: frees host buffers the checkpoint made while loading (a GGUF
  // file's converted blocks), which nothing reads once uploaded. mmap'd and dummy tensors stay.
  void release_converted() {
    if (checkpoint_) checkpoint_->release_converted();
  }
  // Bytes of the weights handed out, as the model keeps them: a tensor quantized as it loads counts at its quantized
  // size once note_stored_as() says so (decode bandwidth bounds divide by these).
  size_t bytes_loaded() const { return bytes_loaded_; }
  void note_stored_as(const std::string& name, size_t bytes);
  // Bytes of the tensors loaded so far whose names satisfy `pred` (e.g. MoE experts, for bandwidth bounds).
  size_t bytes_loaded_if(const std::function<bool(std::string_view)>& pred) const;

 private:
  WeightSource() = default;
  Tensor require_whole(const std::string& name, const std::vector<int64_t>& shape, std::optional<DType> dtype);
  Tensor make_dummy(const std::string& name, const std::vector<int64_t>& shape, DType dtype);

  std::shared_ptr<Checkpoint> checkpoint_;
  uint64_t seed_ = 0;
  DType dummy_dtype_ = DType::kBF16;
  std::vector<std::string> dummy_layout_;
  std::vector<std::shared_ptr<Buffer>> owned_buffers_;  // dummy tensors and aligned copies
  std::shared_ptr<ThreadPool> fill_pool_;               // fills large dummy tensors in parallel
  Shard shard_;
  size_t bytes_loaded_ = 0;
  std::vector<std::pair<std::string, size_t>> loaded_;  // name, bytes of every tensor handed out
};

}  // namespace rs::loader
