#include "loader/safetensors.h"

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

#include "base/error.h"

namespace rs::loader {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr size_t kMaxHeaderBytes = 100u << 20;

// Parses and validates the JSON header of `path` (size `file_size`, header text `text`).
TensorEntries parse_header(const fs::path& path, std::string_view text, size_t data_start, size_t file_size) {
  json header;
  try {
    header = json::parse(text);
  } catch (const json::exception& e) {
    RS_FAIL("{}: safetensors header is not valid JSON: {}", path.string(), e.what());
  }
  RS_CHECK(header.is_object(), "{}: safetensors header is not a JSON object", path.string());
  TensorEntries entries;
  std::vector<std::pair<size_t, size_t>> ranges;
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__") continue;
    RS_CHECK(info.is_object() && info.contains("dtype") && info.contains("shape") && info.contains("data_offsets"),
             "{}: tensor '{}' lacks dtype/shape/data_offsets", path.string(), name);
    TensorEntry entry{};
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

TensorEntries parse_safetensors(const fs::path& path, const uint8_t* data, size_t size) {
  RS_CHECK(size >= 8, "{}: file of {} bytes is too short to be safetensors (truncated?)", path.string(), size);
  uint64_t header_bytes;
  std::memcpy(&header_bytes, data, 8);
  RS_CHECK(header_bytes <= kMaxHeaderBytes && 8 + header_bytes <= size,
           "{}: header length {} exceeds the file size {} (truncated or not safetensors)", path.string(), header_bytes,
           size);
  const std::string_view text(reinterpret_cast<const char*>(data) + 8, header_bytes);
  return parse_header(path, text, 8 + header_bytes, size);
}

}  // namespace rs::loader
