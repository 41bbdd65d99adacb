#include "loader/torch_zip.h"

#include <algorithm>
#include <map>
#include <string_view>

#include "base/error.h"
#include "loader/torch_pickle.h"

namespace rs::loader {
namespace fs = std::filesystem;
namespace {

constexpr uint32_t kLocalHeader = 0x04034b50;
constexpr uint32_t kCentralHeader = 0x02014b50;
constexpr uint32_t kEndOfDirectory = 0x06054b50;
constexpr uint32_t kZip64EndOfDirectory = 0x06064b50;
constexpr uint32_t kZip64Locator = 0x07064b50;

// One member of the archive: where its bytes lie.
struct Record {
  size_t offset;  // of the data, from the start of the file
  size_t bytes;
  bool stored;  // not compressed
};

// Bounds-checked little-endian reads; every failure names the file.
class Bytes {
 public:
  Bytes(const fs::path& path, const uint8_t* data, size_t size) : path_(path), data_(data), size_(size) {}

  uint64_t at(size_t offset, int width) const {
    RS_CHECK(offset <= size_ && static_cast<size_t>(width) <= size_ - offset,
             "{}: zip structure at byte {} lies past the end of the file (truncated?)", path_.string(), offset);
    uint64_t value = 0;
    for (int i = 0; i < width; ++i) value |= static_cast<uint64_t>(data_[offset + i]) << (8 * i);
    return value;
  }
  std::string_view text(size_t offset, size_t length) const {
    RS_CHECK(offset <= size_ && length <= size_ - offset, "{}: zip name at byte {} lies past the end of the file",
             path_.string(), offset);
    return {reinterpret_cast<const char*>(data_) + offset, length};
  }
  size_t size() const { return size_; }
  const fs::path& path() const { return path_; }

 private:
  const fs::path& path_;
  const uint8_t* data_;
  size_t size_;
};

// The end-of-central-directory record: the last signature within the trailing comment's reach.
size_t find_end_of_directory(const Bytes& in) {
  RS_CHECK(in.size() >= 22, "{}: too short to be a zip archive (truncated?)", in.path().string());
  const size_t lowest = in.size() > 22 + 0xffff ? in.size() - 22 - 0xffff : 0;
  for (size_t pos = in.size() - 22;; --pos) {
    if (in.at(pos, 4) == kEndOfDirectory) return pos;
    RS_CHECK(pos > lowest, "{}: no zip central directory found (truncated download?)", in.path().string());
  }
}

std::map<std::string, Record, std::less<>> read_directory(const Bytes& in) {
  const std::string file = in.path().string();
  const size_t end = find_end_of_directory(in);
  uint64_t count = in.at(end + 10, 2);
  uint64_t directory = in.at(end + 16, 4);
  if (count == 0xffff || directory == 0xffffffff) {  // Zip64: the locator sits just before the end record
    RS_CHECK(end >= 20 && in.at(end - 20, 4) == kZip64Locator, "{}: zip64 archive without its locator", file);
    const uint64_t record = in.at(end - 12, 8);
    RS_CHECK(in.at(record, 4) == kZip64EndOfDirectory, "{}: zip64 end record not where its locator says", file);
    count = in.at(record + 32, 8);
    directory = in.at(record + 48, 8);
  }
  std::map<std::string, Record, std::less<>> records;
  uint64_t pos = directory;
  for (uint64_t i = 0; i < count; ++i) {
    RS_CHECK(in.at(pos, 4) == kCentralHeader, "{}: zip central directory entry {} is damaged", file, i);
    const uint64_t flags = in.at(pos + 8, 2), method = in.at(pos + 10, 2);
    uint64_t compressed = in.at(pos + 20, 4), bytes = in.at(pos + 24, 4);
    const uint64_t name_length = in.at(pos + 28, 2), extra_length = in.at(pos + 30, 2);
    const uint64_t comment_length = in.at(pos + 32, 2);
    uint64_t local = in.at(pos + 42, 4);
    const std::string name(in.text(pos + 46, name_length));
    // Zip64 extra field: 64-bit values for the fields saturated above, in this order.
    for (uint64_t extra = pos + 46 + name_length; extra + 4 <= pos + 46 + name_length + extra_length;) {
      const uint64_t id = in.at(extra, 2), length = in.at(extra + 2, 2);
      if (id == 0x0001) {
        uint64_t field = extra + 4;
        for (uint64_t* value : {&bytes, &compressed, &local}) {
          if (*value != 0xffffffff) continue;
          RS_CHECK(field + 8 <= extra + 4 + length, "{}: zip64 field of '{}' is short", file, name);
          *value = in.at(field, 8);
          field += 8;
        }
      }
      extra += 4 + length;
    }
    RS_CHECK(in.at(local, 4) == kLocalHeader, "{}: zip record '{}' is damaged", file, name);
    const uint64_t data = local + 30 + in.at(local + 26, 2) + in.at(local + 28, 2);
    RS_CHECK(data <= in.size() && compressed <= in.size() - data,
             "{}: zip record '{}' ends past the end of the file (truncated?)", file, name);
    // Stored means readable in place: not compressed and not encrypted (flag bit 0).
    records[name] =
        Record{.offset = data, .bytes = compressed, .stored = method == 0 && !(flags & 1) && compressed == bytes};
    pos += 46 + name_length + extra_length + comment_length;
  }
  return records;
}

// Elements a tensor spans in its storage; throws unless it is laid out row-major without gaps.
uint64_t contiguous_numel(const PickledTensor& t, const std::string& file) {
  uint64_t numel = 1;
  for (int64_t d : t.shape)
    RS_CHECK(!__builtin_mul_overflow(numel, static_cast<uint64_t>(d), &numel), "{}: tensor '{}' is too large", file,
             t.name);
  if (numel == 0) return 0;
  uint64_t expected = 1;
  for (size_t i = t.shape.size(); i-- > 0;) {
    RS_CHECK(t.shape[i] == 1 || static_cast<uint64_t>(t.stride[i]) == expected,
             "{}: tensor '{}' is stored non-contiguously (save it with .contiguous(), or as safetensors)", file,
             t.name);
    expected *= static_cast<uint64_t>(t.shape[i]);
  }
  return numel;
}

}  // namespace

bool looks_like_zip(const uint8_t* data, size_t size) {
  return size >= 4 && data[0] == 'P' && data[1] == 'K' && data[2] == 3 && data[3] == 4;
}

TensorEntries parse_torch_zip(const fs::path& path, const uint8_t* data, size_t size) {
  const std::string file = path.string();
  const Bytes in(path, data, size);
  const auto records = read_directory(in);
  // torch.save puts every record under one top folder: <prefix>/data.pkl, <prefix>/data/<key>, ...
  auto pickle = std::find_if(records.begin(), records.end(), [](const auto& item) {
    const std::string_view name = item.first;
    return name.size() > 9 && name.ends_with("/data.pkl") && name.find('/') == name.size() - 9;
  });
  RS_CHECK(pickle != records.end(), "{}: a zip archive without data.pkl is not a PyTorch checkpoint", file);
  const std::string prefix = pickle->first.substr(0, pickle->first.size() - 8);
  RS_CHECK(pickle->second.stored, "{}: data.pkl is compressed or encrypted; torch.save stores it as is", file);
  auto order = records.find(prefix + "byteorder");
  RS_CHECK(
      order == records.end() || !order->second.stored || in.text(order->second.offset, order->second.bytes) == "little",
      "{}: a big-endian PyTorch checkpoint is not supported", file);

  TensorEntries entries;
  const auto tensors = read_pickled_state_dict(in.text(pickle->second.offset, pickle->second.bytes), file);
  for (const PickledTensor& t : tensors) {
    auto record = records.find(prefix + "data/" + t.storage_key);
    RS_CHECK(record != records.end(), "{}: tensor '{}' refers to storage record {} that the archive lacks", file,
             t.name, t.storage_key);
    RS_CHECK(record->second.stored,
             "{}: the storage of tensor '{}' is compressed or encrypted; it must be stored as is to be mapped", file,
             t.name);
    const uint64_t element = dtype_size(t.dtype);
    const uint64_t numel = contiguous_numel(t, file);
    const uint64_t capacity = record->second.bytes / element;
    RS_CHECK(static_cast<uint64_t>(t.storage_offset) <= capacity && numel <= capacity - t.storage_offset,
             "{}: tensor '{}' needs {} elements from element {} of a storage holding {}", file, t.name, numel,
             t.storage_offset, capacity);
    RS_CHECK(entries
                 .emplace(t.name, TensorEntry{.dtype = t.dtype,
                                              .shape = t.shape,
                                              .offset = record->second.offset + t.storage_offset * element,
                                              .bytes = numel * element})
                 .second,
             "{}: tensor '{}' appears twice", file, t.name);
  }
  return entries;
}

}  // namespace rs::loader
