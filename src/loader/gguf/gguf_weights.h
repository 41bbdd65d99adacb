// The tensors of a GGUF model (one file or its gguf-split parts) under the Hugging Face names the model loaders ask
// for, in layouts they already read: F32/F16/BF16 as stored (zero-copy), and quantized matrices as mlx_lm's affine
// triple
// (`.weight` U32 codes, `.scales` and `.biases` F32 per group; blocks.h), which LinearLoader turns into
// LinearWeight::kAffine. Expert stacks (ffn_*_exps) appear as mlx_lm's `mlp.switch_mlp.*` stacks, and Llama's q/k rows,
// which convert_hf_to_gguf.py permutes for ggml's RoPE, are put back in Hugging Face order.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "loader/gguf/gguf_file.h"
#include "tensor/buffer.h"
#include "tensor/tensor.h"

namespace rs {
class ThreadPool;
}

namespace rs::loader::gguf {

// The parts of one model among `paths` (.gguf files): a single file, or every split "<name>-0000k-of-0000n.gguf".
// Fails naming the files when they hold more than one model or an incomplete split.
std::vector<std::filesystem::path> model_files(const std::vector<std::filesystem::path>& paths);

class GgufWeights {
 public:
  explicit GgufWeights(const std::vector<std::filesystem::path>& files);
  ~GgufWeights();

  // The first part's metadata (gguf-split keeps the model's keys there).
  const nlohmann::json& metadata() const { return files_.front()->metadata(); }
  // A tensor by its GGUF name ("token_embd.weight"), or null.
  const TensorRecord* record(const std::string& gguf_name) const;

  bool contains(const std::string& name) const { return entries_.count(name) != 0; }
  Tensor tensor(const std::string& name) const;  // by Hugging Face name; fails naming the file when absent
  std::string file_of(const std::string& name) const;
  std::vector<std::string> names() const;
  size_t total_bytes() const;
  // Frees every buffer made while loading (converted blocks, built tensors): the views handed out become invalid.
  void release_converted();
  // Tensors in the files, mapped or not (a bound on any per-layer metadata).
  size_t tensor_count() const { return records_.size(); }
  // {arch}.block_count, checked against the tensors (every layer has some).
  int32_t block_count() const;

 private:
  enum class Part : uint8_t { kStored, kCodes, kScales, kBiases, kDecoded, kBuilt };
  struct Entry {
    const TensorRecord* record;
    const GgufFile* file;
    Part part;
    DType dtype;
    std::vector<int64_t> shape;
    // Hugging Face row r is GGUF row rows[r] (Llama's q/k un-permuted, Qwen3.5's value heads back in grouped order,
    // a part of a fused tensor); columns likewise (decoded to f32). Null: as stored. 1-D tensors: one element a row.
    std::shared_ptr<const std::vector<int64_t>> rows, cols;
    // kBuilt: a Hugging Face tensor made from one or more GGUF tensors (gpt-oss's interleaved gate|up experts):
    // fills dtype x shape bytes.
    std::function<void(uint8_t*)> build;
  };
  // Arch-specific tensors whose Hugging Face form combines GGUF tensors (gguf_weights_arch.cpp).
  void add_gpt_oss_experts(int32_t layers);
  void add_hybrid_qwen_layers(const std::string& arch, int32_t layers);
  // Presents GGUF tensor `source` as Hugging Face tensor `name` (".weight" of a matrix: an affine triple when
  // quantized), with rows and columns reordered as given and `shape` overriding the stored one.
  void add_mapped(const std::string& name, const TensorRecord& source, std::shared_ptr<const std::vector<int64_t>> rows,
                  std::shared_ptr<const std::vector<int64_t>> cols = nullptr, std::vector<int64_t> shape = {});
  void add_built(const std::string& name, const TensorRecord& source, DType dtype, std::vector<int64_t> shape,
                 std::function<void(uint8_t*)> build);
  const TensorRecord& require_record(const std::string& gguf_name) const;
  const GgufFile* file_holding(const TensorRecord& record) const;  // the part a record came from
  struct Converted {
    Buffer codes, scales, biases, values;
  };
  const Converted& convert(const Entry& entry) const;
  ThreadPool& pool() const;  // made on first use

  std::vector<std::unique_ptr<GgufFile>> files_;
  std::map<std::string, const TensorRecord*> records_;
  std::map<std::string, Entry> entries_;
  mutable std::mutex mutex_;
  using ConvertedKey = std::tuple<const TensorRecord*, const std::vector<int64_t>*, const std::vector<int64_t>*>;
  mutable std::map<ConvertedKey, Converted> converted_;
  mutable std::map<std::string, Buffer> built_;
  mutable std::unique_ptr<ThreadPool> pool_;
};

}  // namespace rs::loader::gguf
