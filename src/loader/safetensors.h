// Safetensors reading: mmap'd files (single or sharded via model.safetensors.index.json) exposing zero-copy views.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace rs::loader {

// One mmap'd .safetensors file. Validates the header fully at open: every error names the file and the tensor.
class SafetensorsFile {
 public:
  struct Entry {
    DType dtype;
    std::vector<int64_t> shape;
    size_t offset;  // from the start of the file
    size_t bytes;
  };

  explicit SafetensorsFile(const std::filesystem::path& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::filesystem::path& path() const { return path_; }
  const std::map<std::string, Entry>& entries() const { return entries_; }
  bool contains(const std::string& name) const { return entries_.count(name) != 0; }
  // A read-only view into the mapping (valid while this object lives).
  Tensor tensor(const std::string& name) const;

 private:
  std::filesystem::path path_;
  void* mapping_ = nullptr;
  size_t size_ = 0;
  std::map<std::string, Entry> entries_;
};

// All tensors of a checkpoint folder: model.safetensors, or the shards listed by model.safetensors.index.json,
// or every *.safetensors file in the folder.
class SafetensorsCheckpoint {
 public:
  explicit SafetensorsCheckpoint(const std::filesystem::path& model_dir);

  bool contains(const std::string& name) const { return owner_.count(name) != 0; }
  Tensor tensor(const std::string& name) const;  // throws naming the checkpoint when missing
  // The file a tensor lives in, for error messages.
  std::string file_of(const std::string& name) const;
  std::vector<std::string> names() const;
  size_t total_bytes() const;

 private:
  std::filesystem::path dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const SafetensorsFile*> owner_;
};

}  // namespace rs::loader
