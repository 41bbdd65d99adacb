#include "loader/checkpoint.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "base/error.h"
#include "loader/gguf/gguf_weights.h"
#include "loader/mapped_file.h"
#include "loader/safetensors.h"
#include "loader/torch_zip.h"

namespace rs::loader {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// The shard files an index (model.safetensors.index.json or pytorch_model.bin.index.json) lists.
std::vector<fs::path> shards_of(const fs::path& index) {
  std::ifstream in(index);
  json parsed;
  try {
    parsed = json::parse(in);
  } catch (const json::exception& e) {
    RS_FAIL("{}: not valid JSON: {}", index.string(), e.what());
  }
  RS_CHECK(parsed.contains("weight_map") && parsed["weight_map"].is_object(), "{}: missing weight_map", index.string());
  std::set<std::string> shard_names;
  for (const auto& [tensor, shard] : parsed["weight_map"].items()) {
    RS_CHECK(shard.is_string(), "{}: shard of '{}' is not a string", index.string(), tensor);
    shard_names.insert(shard.get<std::string>());
  }
  std::vector<fs::path> paths;
  for (const auto& shard : shard_names) paths.push_back(index.parent_path() / shard);
  return paths;
}

// A Git LFS pointer (a repository cloned without `git lfs pull`) in place of the weights.
bool is_lfs_pointer(const uint8_t* data, size_t size) {
  static constexpr std::string_view kPrefix = "version https://git-lfs";
  return size >= kPrefix.size() && std::memcmp(data, kPrefix.data(), kPrefix.size()) == 0;
}

}  // namespace

// The weight files of a folder, in transformers' order of preference; then, for folders that name a single file
// differently, every *.safetensors file.
std::vector<fs::path> weight_files(const fs::path& dir) {
  if (fs::exists(dir / "model.safetensors")) return {dir / "model.safetensors"};
  if (fs::exists(dir / "model.safetensors.index.json")) return shards_of(dir / "model.safetensors.index.json");
  if (fs::exists(dir / "pytorch_model.bin")) return {dir / "pytorch_model.bin"};
  if (fs::exists(dir / "pytorch_model.bin.index.json")) return shards_of(dir / "pytorch_model.bin.index.json");
  std::vector<fs::path> paths;
  if (fs::is_directory(dir)) {
    for (const auto& item : fs::directory_iterator(dir))
      if (item.path().extension() == ".safetensors") paths.push_back(item.path());
    std::sort(paths.begin(), paths.end());
  }
  return paths;
}

CheckpointFile::CheckpointFile(const fs::path& path) : path_(path) {
  const Mapping mapping = map_readonly(path, 8, "safetensors or a PyTorch checkpoint");
  mapping_ = mapping.data;
  size_ = mapping.size;
  try {
    const auto* bytes = static_cast<const uint8_t*>(mapping_);
    // torch.save before 1.6 wrote a bare pickle stream that opens with PROTO 2 and a LONG1 of 10 bytes (its magic
    // number) instead of a zip archive; as a safetensors header length these bytes would exceed the 100 MB limit.
    static constexpr uint8_t kLegacyTorch[4] = {0x80, 0x02, 0x8a, 0x0a};
    RS_CHECK(std::memcmp(bytes, kLegacyTorch, 4) != 0,
             "{}: a PyTorch checkpoint in the legacy (pre-1.6) format; re-save it with a newer torch or convert it "
             "to safetensors",
             path.string());
    RS_CHECK(!is_lfs_pointer(bytes, size_),
             "{}: a Git LFS pointer, not the weights (run `git lfs pull` in the model's folder)", path.string());
    entries_ =
        looks_like_zip(bytes, size_) ? parse_torch_zip(path, bytes, size_) : parse_safetensors(path, bytes, size_);
    for (const auto& [name, entry] : entries_)
      RS_CHECK(entry.shape.size() <= static_cast<size_t>(Tensor::kMaxDims), "{}: tensor '{}' has rank {} (at most {})",
               path.string(), name, entry.shape.size(), Tensor::kMaxDims);
  } catch (...) {
    ::munmap(mapping_, size_);
    mapping_ = nullptr;
    throw;
  }
}

CheckpointFile::~CheckpointFile() {
  if (mapping_) ::munmap(mapping_, size_);
}

Tensor CheckpointFile::tensor(const std::string& name) const {
  auto it = entries_.find(name);
  RS_CHECK(it != entries_.end(), "{}: no tensor '{}'", path_.string(), name);
  const TensorEntry& entry = it->second;
  void* data = static_cast<char*>(mapping_) + entry.offset;
  return Tensor(data, entry.dtype, entry.shape.data(), static_cast<int>(entry.shape.size()));
}

Checkpoint::~Checkpoint() = default;

Checkpoint::Checkpoint(const fs::path& model_dir) : dir_(model_dir) {
  const std::vector<fs::path> paths = weight_files(model_dir);
  if (paths.empty() && fs::is_directory(model_dir)) {
    std::vector<fs::path> ggufs;
    for (const auto& item : fs::directory_iterator(model_dir))
      if (item.path().extension() == ".gguf") ggufs.push_back(item.path());
    std::sort(ggufs.begin(), ggufs.end());
    if (!ggufs.empty()) {
      gguf_ = std::make_unique<gguf::GgufWeights>(gguf::model_files(ggufs));
      return;
    }
  }
  RS_CHECK(!paths.empty(),
           "{}: no *.safetensors, pytorch_model.bin or .gguf weights found (use --load-format dummy for random "
           "weights)",
           model_dir.string());
  for (const auto& path : paths) {
    files_.push_back(std::make_unique<CheckpointFile>(path));
    for (const auto& [name, entry] : files_.back()->entries()) {
      RS_CHECK(owner_.emplace(name, files_.back().get()).second, "{}: tensor '{}' appears in two shards",
               model_dir.string(), name);
    }
  }
}

bool Checkpoint::contains(const std::string& name) const {
  return gguf_ ? gguf_->contains(name) : owner_.count(name) != 0;
}

Tensor Checkpoint::tensor(const std::string& name) const {
  if (gguf_) return gguf_->tensor(name);
  auto it = owner_.find(name);
  RS_CHECK(it != owner_.end(), "{}: missing tensor '{}'", dir_.string(), name);
  return it->second->tensor(name);
}

std::string Checkpoint::file_of(const std::string& name) const {
  if (gguf_) return gguf_->file_of(name);
  auto it = owner_.find(name);
  return it == owner_.end() ? dir_.string() : it->second->path().string();
}

std::vector<std::string> Checkpoint::names() const {
  if (gguf_) return gguf_->names();
  std::vector<std::string> out;
  for (const auto& [name, file] : owner_) out.push_back(name);
  return out;
}

void Checkpoint::release_converted() {
  if (gguf_) gguf_->release_converted();
}

size_t Checkpoint::total_bytes() const {
  if (gguf_) return gguf_->total_bytes();
  size_t total = 0;
  for (const auto& file : files_)
    for (const auto& [name, entry] : file->entries()) total += entry.bytes;
  return total;
}

}  // namespace rs::loader
