// A model folder's weights: mmap'd safetensors files (single or sharded via model.safetensors.index.json), or, for
// releases that ship only PyTorch pickles (many EAGLE-3 heads), pytorch_model.bin (single or sharded via
// pytorch_model.bin.index.json). Tensors are zero-copy views into the mappings either way.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "loader/tensor_entry.h"
#include "tensor/tensor.h"

namespace rs::loader {
namespace gguf {
class GgufWeights;
}

// One mmap'd weights file, its format told by its first bytes (a zip archive is a PyTorch checkpoint).
class CheckpointFile {
 public:
  explicit CheckpointFile(const std::filesystem::path& path);
  ~CheckpointFile();
  CheckpointFile(const CheckpointFile&) = delete;
  CheckpointFile& operator=(const CheckpointFile&) = delete;

  const std::filesystem::path& path() const { return path_; }
  const TensorEntries& entries() const { return entries_; }
  bool contains(const std::string& name) const { return entries_.count(name) != 0; }
  // A read-only view into the mapping (valid while this object lives).
  Tensor tensor(const std::string& name) const;

 private:
  std::filesystem::path path_;
  void* mapping_ = nullptr;
  size_t size_ = 0;
  TensorEntries entries_;
};

// All tensors of a checkpoint folder. Safetensors win where both kinds are present, as in transformers; a folder with
// neither reads its .gguf files (one model, or the parts of one) under Hugging Face names (gguf/gguf_weights.h).
class Checkpoint {
 public:
  explicit Checkpoint(const std::filesystem::path& model_dir);
  ~Checkpoint();

  bool contains(const std::string& name) const;
  Tensor tensor(const std::string& name) const;  // throws naming the checkpoint when missing
  // The file a tensor lives in, for error messages.
  std::string file_of(const std::string& name) const;
  std::vector<std::string> names() const;
  size_t total_bytes() const;
  // Frees host buffers made while loading (a GGUF file's converted blocks); mmap'd views stay valid.
  void release_converted();

 private:
  std::filesystem::path dir_;
  std::vector<std::unique_ptr<CheckpointFile>> files_;
  std::map<std::string, const CheckpointFile*> owner_;
  std::unique_ptr<gguf::GgufWeights> gguf_;
};

// The safetensors / PyTorch files a folder's weights are read from, in transformers' order of preference
// (model.safetensors, its index's shards, pytorch_model.bin, its shards; else every *.safetensors); empty for none.
std::vector<std::filesystem::path> weight_files(const std::filesystem::path& dir);

}  // namespace rs::loader
