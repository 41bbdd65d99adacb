#include "loader/safetensors.h"

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

namespace rs::loader {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr size_t kMaxHeaderBytes = 100u << 20;

// Parses and validates the JSON header of `path` (size `file_size`, header text `text`).
std::map<std::string, SafetensorsFile::Entry> parse_header(const fs::path& path, std::string_view text,
                                                           size_t data_start, size_t file_size) {
  json header;
  try {
    header = json::parse(text);
  } catch (const json::exception& e) {
    RS_FAIL("{}: safetensors header is not valid JSON: {}", path.string(), e.what());
  }
  RS_CHECK(header.is_object(), "{}: safetensors header is not a JSON object", path.string());
  std::map<std::string, SafetensorsFile::Entry> entries;
  std::vector<std::pair<size_t, size_t>> ranges;
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__") continue;
    RS_CHECK(info.is_object() && info.contains("dtype") && info.contains("shape") && info.contains("data_offsets"),
             "{}: tensor '{}' lacks dtype/shape/data_offsets", path.string(), name);
    SafetensorsFile::Entry entry{};
    const auto& dtype = info["dtype"];
    RS_CHECK(dtype.is_string() && parse_safetensors_dtype(dtype.get<std::string>(), &entry.dtype),
             "{}: tensor '{}' has unknown dtype {}", path.string(), name, dtype.dump());
    RS_CHECK(info["shape"].is_array(), "{}: tensor '{}' shape is not a list", path.string(), name);
    uint64_t numel = 1;
    for (const auto& dim : info["shape"]) {
      RS_CHECK((dim.is_number_unsigned() && dim.get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX)) ||
                   (dim.is_number_integer() && dim.get<int64_t>() >= 0),
               "{}: tensor '{}' has a bad dimension {}", path.string(), name, dim.dump());
      entry.shape.push_back(dim.get<int64_t>());
      RS_CHECK(!__builtin_mul_overflow(numel, static_cast<uint64_t>(dim.get<int64_t>()), &numel),
               "{}: tensor '{}' has a shape {} too large to address", path.string(), name, info["shape"].dump());
    }
    uint64_t expected_bytes = 0;
    RS_CHECK(!__builtin_mul_overflow(numel, dtype_size(entry.dtype), &expected_bytes),
             "{}: tensor '{}' has a shape {} too large to address", path.string(), name, info["shape"].dump());
    const auto& offsets = info["data_offsets"];
    RS_CHECK(
        offsets.is_array() && offsets.size() == 2 && offsets[0].is_number_unsigned() && offsets[1].is_number_unsigned(),
        "{}: tensor '{}' has bad data_offsets {}", path.string(), name, offsets.dump());
    const size_t begin = offsets[0].get<size_t>(), end = offsets[1].get<size_t>();
    RS_CHECK(begin <= end, "{}: tensor '{}' has data_offsets [{}, {}) reversed", path.string(), name, begin, end);
    entry.bytes = end - begin;
    RS_CHECK(entry.bytes == expected_bytes,
             "{}: tensor '{}' of shape {} and dtype {} needs {} bytes but data_offsets give {}", path.string(), name,
             info["shape"].dump(), dtype.get<std::string>(), numel * dtype_size(entry.dtype), entry.bytes);
    entry.offset = data_start + begin;
    RS_CHECK(end <= file_size && entry.offset + entry.bytes <= file_size,
             "{}: tensor '{}' ends at byte {} but the file has {} bytes (truncated file?)", path.string(), name,
             entry.offset + entry.bytes, file_size);
    ranges.emplace_back(begin, end);
    entries.emplace(name, std::move(entry));
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i)
    RS_CHECK(ranges[i].first >= ranges[i - 1].second, "{}: tensor data ranges overlap", path.string());
  return entries;
}

}  // namespace

SafetensorsFile::SafetensorsFile(const fs::path& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  RS_CHECK(fd >= 0, "{}: cannot open: {}", path.string(), std::strerror(errno));
  struct stat info {};
  ::fstat(fd, &info);
  size_ = static_cast<size_t>(info.st_size);
  if (size_ < 8) {
    ::close(fd);
    RS_FAIL("{}: file of {} bytes is too short to be safetensors (truncated?)", path.string(), size_);
  }
  mapping_ = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  RS_CHECK(mapping_ != MAP_FAILED, "{}: mmap failed: {}", path.string(), std::strerror(errno));
  try {
    uint64_t header_bytes;
    std::memcpy(&header_bytes, mapping_, 8);
    RS_CHECK(header_bytes <= kMaxHeaderBytes && 8 + header_bytes <= size_,
             "{}: header length {} exceeds the file size {} (truncated or not safetensors)", path.string(),
             header_bytes, size_);
    const std::string_view text(static_cast<const char*>(mapping_) + 8, header_bytes);
    entries_ = parse_header(path, text, 8 + header_bytes, size_);
  } catch (...) {
    ::munmap(mapping_, size_);
    mapping_ = nullptr;
    throw;
  }
}

SafetensorsFile::~SafetensorsFile() {
  if (mapping_) ::munmap(mapping_, size_);
}

Tensor SafetensorsFile::tensor(const std::string& name) const {
  auto it = entries_.find(name);
  RS_CHECK(it != entries_.end(), "{}: no tensor '{}'", path_.string(), name);
  const Entry& entry = it->second;
  void* data = static_cast<char*>(mapping_) + entry.offset;
  return Tensor(data, entry.dtype, entry.shape.data(), static_cast<int>(entry.shape.size()));
}

SafetensorsCheckpoint::SafetensorsCheckpoint(const fs::path& model_dir) : dir_(model_dir) {
  std::vector<fs::path> paths;
  const fs::path index = model_dir / "model.safetensors.index.json";
  if (fs::exists(index)) {
    std::ifstream in(index);
    json parsed;
    try {
      parsed = json::parse(in);
    } catch (const json::exception& e) {
      RS_FAIL("{}: not valid JSON: {}", index.string(), e.what());
    }
    RS_CHECK(parsed.contains("weight_map") && parsed["weight_map"].is_object(), "{}: missing weight_map",
             index.string());
    std::set<std::string> shard_names;
    for (const auto& [tensor, shard] : parsed["weight_map"].items()) {
      RS_CHECK(shard.is_string(), "{}: shard of '{}' is not a string", index.string(), tensor);
      shard_names.insert(shard.get<std::string>());
    }
    for (const auto& shard : shard_names) paths.push_back(model_dir / shard);
  } else if (fs::exists(model_dir / "model.safetensors")) {
    paths.push_back(model_dir / "model.safetensors");
  } else if (fs::is_directory(model_dir)) {
    for (const auto& item : fs::directory_iterator(model_dir))
      if (item.path().extension() == ".safetensors") paths.push_back(item.path());
    std::sort(paths.begin(), paths.end());
  }
  RS_CHECK(!paths.empty(), "{}: no *.safetensors weights found (use --load-format dummy for random weights)",
           model_dir.string());
  for (const auto& path : paths) {
    files_.push_back(std::make_unique<SafetensorsFile>(path));
    for (const auto& [name, entry] : files_.back()->entries()) {
      RS_CHECK(owner_.emplace(name, files_.back().get()).second, "{}: tensor '{}' appears in two shards",
               model_dir.string(), name);
    }
  }
}

Tensor SafetensorsCheckpoint::tensor(const std::string& name) const {
  auto it = owner_.find(name);
  RS_CHECK(it != owner_.end(), "{}: missing tensor '{}'", dir_.string(), name);
  return it->second->tensor(name);
}

std::string SafetensorsCheckpoint::file_of(const std::string& name) const {
  auto it = owner_.find(name);
  return it == owner_.end() ? dir_.string() : it->second->path().string();
}

std::vector<std::string> SafetensorsCheckpoint::names() const {
  std::vector<std::string> out;
  for (const auto& [name, file] : owner_) out.push_back(name);
  return out;
}

size_t SafetensorsCheckpoint::total_bytes() const {
  size_t total = 0;
  for (const auto& file : files_)
    for (const auto& [name, entry] : file->entries()) total += entry.bytes;
  return total;
}

}  // namespace rs::loader
