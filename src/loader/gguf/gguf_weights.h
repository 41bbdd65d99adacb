// The tensors of a GGUF model (one file or its gguf-split parts) under the Hugging Face names the model loaders ask
// for, in layouts they already read: F32/F16/BF16 as stored (zero-copy), and quantized matrices as mlx_lm's affine
// triple
// (`.weight` U32 codes, `.scales` and `.biases` F32 per group; blocks.h), which LinearLoader turns into
// LinearWeight::kAffine. Expert stacks (ffn_*_exps) appear as mlx_lm's `mlp.switch_mlp.*` stacks, and Llama's q/k rows,
// which convert_hf_to_gguf.py permutes for ggml's RoPE, are put back in Hugging Face order.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "loader/gguf/gguf_file.h"
#include "tensor/buffer.h"
#include "tensor/tensor.h"

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

 private:
  enum class Part : uint8_t { kStored, kCodes, kScales, kBiases, kDecoded };
  struct Entry {
    const TensorRecord* record;
    const GgufFile* file;
    Part part;
    DType dtype;
    std::vector<int64_t> shape;
    int32_t permute_heads = 0;  // > 0: Llama q/k rows to un-permute, heads of this many
  };
  struct Converted {
    Buffer codes, scales, biases, values;
  };
  const Converted& convert(const Entry& entry) const;

  std::vector<std::unique_ptr<GgufFile>> files_;
  std::map<std::string, const TensorRecord*> records_;
  std::map<std::string, Entry> entries_;
  mutable std::mutex mutex_;
  mutable std::map<const TensorRecord*, Converted> converted_;
};

}  // namespace rs::loader::gguf
