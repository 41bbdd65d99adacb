#include "loader/gguf/gguf_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <limits>

#include <fmt/format.h>

#include "base/error.h"
#include "loader/mapped_file.h"

namespace rs::loader::gguf {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read little-endian
constexpr int kMaxDims = 4;              // GGML_MAX_DIMS
constexpr int kMaxArrayDepth = 4;

enum ValueType : uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};

// Reads little-endian values from [data, data + size), failing with the file's name and the offset on overrun.
class Reader {
 public:
  Reader(const fs::path& path, const uint8_t* data, size_t size) : path_(path), data_(data), size_(size) {}

  template <typename T>
  T get() {
    need(sizeof(T));
    T value;
    std::memcpy(&value, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return value;
  }
  std::string string() {
    const uint64_t length = get<uint64_t>();
    need(length);
    std::string out(reinterpret_cast<const char*>(data_ + pos_), length);
    pos_ += length;
    return out;
  }
  size_t pos() const { return pos_; }
  size_t left() const { return size_ - pos_; }

 private:
  void need(uint64_t bytes) const {
    RS_CHECK(bytes <= size_ - pos_, "{}: truncated GGUF (needs {} bytes at offset {} of {})", path_.string(), bytes,
             pos_, size_);
  }
  const fs::path& path_;
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

json read_value(Reader& in, uint32_t type, const fs::path& path, const std::string& key, int depth) {
  switch (type) {
    case kU8: return in.get<uint8_t>();
    case kI8: return in.get<int8_t>();
    case kU16: return in.get<uint16_t>();
    case kI16: return in.get<int16_t>();
    case kU32: return in.get<uint32_t>();
    case kI32: return in.get<int32_t>();
    case kF32: return std::stod(fmt::format("{}", in.get<float>()));  // 1e-05, not 9.999999747378752e-06
    case kBool: return in.get<uint8_t>() != 0;
    case kString: return in.string();
    case kU64: return in.get<uint64_t>();
    case kI64: return in.get<int64_t>();
    case kF64: return in.get<double>();
    case kArray: {
      RS_CHECK(depth < kMaxArrayDepth, "{}: metadata '{}' nests arrays deeper than {}", path.string(), key,
               kMaxArrayDepth);
      const uint32_t element_type = in.get<uint32_t>();
      const uint64_t count = in.get<uint64_t>();
      // Every element takes at least a byte: a count beyond the bytes left is a corrupt file, not an allocation.
      RS_CHECK(count <= in.left(), "{}: metadata '{}' claims {} elements in {} bytes", path.string(), key, count,
               in.left());
      json out = json::array();
      for (uint64_t i = 0; i < count; ++i) out.push_back(read_value(in, element_type, path, key, depth + 1));
      return out;
    }
    default: RS_FAIL("{}: metadata '{}' has unknown value type {}", path.string(), key, type);
  }
}

}  // namespace

BlockShape block_shape(GgmlType type) {
  switch (type) {
    case GgmlType::kF32: return {4, 1};
    case GgmlType::kF16: return {2, 1};
    case GgmlType::kBF16: return {2, 1};
    case GgmlType::kF64: return {8, 1};
    case GgmlType::kI8: return {1, 1};
    case GgmlType::kI16: return {2, 1};
    case GgmlType::kI32: return {4, 1};
    case GgmlType::kI64: return {8, 1};
    case GgmlType::kQ4_0: return {18, 32};    // f16 d, 16 bytes of nibbles
    case GgmlType::kQ4_1: return {20, 32};    // f16 d, f16 m, 16 bytes of nibbles
    case GgmlType::kQ5_0: return {22, 32};    // f16 d, 4 bytes of high bits, 16 bytes of nibbles
    case GgmlType::kQ5_1: return {24, 32};    // f16 d, f16 m, 4 + 16 bytes
    case GgmlType::kQ8_0: return {34, 32};    // f16 d, 32 int8
    case GgmlType::kQ2_K: return {84, 256};   // 16 bytes of 4-bit scale|min, 64 of 2-bit codes, f16 d, f16 dmin
    case GgmlType::kQ3_K: return {110, 256};  // 32 bytes of high bits, 64 of 2-bit codes, 12 of 6-bit scales, f16 d
    case GgmlType::kQ4_K: return {144, 256};  // f16 d, f16 dmin, 12 bytes of 6-bit scales and mins, 128 of nibbles
    case GgmlType::kQ5_K: return {176, 256};  // as Q4_K plus 32 bytes of high bits
    case GgmlType::kQ6_K: return {210, 256};  // 128 low nibbles, 64 of high 2 bits, 16 int8 scales, f16 d
    case GgmlType::kMXFP4: return {17, 32};   // e8m0 scale, 16 bytes of e2m1 nibbles
    default: return {};
  }
}

std::string type_name(GgmlType type) {
  switch (type) {
    case GgmlType::kF32: return "F32";
    case GgmlType::kF16: return "F16";
    case GgmlType::kQ4_0: return "Q4_0";
    case GgmlType::kQ4_1: return "Q4_1";
    case GgmlType::kQ5_0: return "Q5_0";
    case GgmlType::kQ5_1: return "Q5_1";
    case GgmlType::kQ8_0: return "Q8_0";
    case GgmlType::kQ8_1: return "Q8_1";
    case GgmlType::kQ2_K: return "Q2_K";
    case GgmlType::kQ3_K: return "Q3_K";
    case GgmlType::kQ4_K: return "Q4_K";
    case GgmlType::kQ5_K: return "Q5_K";
    case GgmlType::kQ6_K: return "Q6_K";
    case GgmlType::kQ8_K: return "Q8_K";
    case GgmlType::kI8: return "I8";
    case GgmlType::kI16: return "I16";
    case GgmlType::kI32: return "I32";
    case GgmlType::kI64: return "I64";
    case GgmlType::kF64: return "F64";
    case GgmlType::kBF16: return "BF16";
    case GgmlType::kMXFP4: return "MXFP4";
  }
  return "type " + std::to_string(static_cast<uint32_t>(type));
}

std::string shown(const json& value) { return value.dump(-1, ' ', false, json::error_handler_t::replace); }

bool is_gguf(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  uint32_t magic = 0;
  return in.read(reinterpret_cast<char*>(&magic), 4) && magic == kMagic;
}

GgufFile::GgufFile(const fs::path& path) : path_(path) {
  const Mapping mapping = map_readonly(path, 4, "a GGUF file");
  mapping_ = mapping.data;
  mapped_size_ = mapping.size;
  try {
    parse(static_cast<const uint8_t*>(mapping_), mapped_size_);
  } catch (...) {
    ::munmap(mapping_, mapped_size_);
    mapping_ = nullptr;
    throw;
  }
}

GgufFile::GgufFile(const fs::path& path, const uint8_t* data, size_t size) : path_(path) { parse(data, size); }

GgufFile::~GgufFile() {
  if (mapping_) ::munmap(mapping_, mapped_size_);
}

void GgufFile::parse(const uint8_t* data, size_t size) {
  Reader in(path_, data, size);
  RS_CHECK(size >= 4 && in.get<uint32_t>() == kMagic, "{}: not a GGUF file (no GGUF magic)", path_.string());
  version_ = in.get<uint32_t>();
  RS_CHECK(version_ == 2 || version_ == 3, "{}: GGUF version {} (radixserve reads versions 2 and 3)", path_.string(),
           version_);
  const uint64_t tensor_count = in.get<uint64_t>();
  const uint64_t kv_count = in.get<uint64_t>();
  // A key takes at least 12 bytes and a tensor record at least 24: larger counts are a corrupt file.
  RS_CHECK(kv_count <= in.left() / 12 && tensor_count <= in.left() / 24,
           "{}: corrupt GGUF header ({} keys, {} tensors)", path_.string(), kv_count, tensor_count);
  for (uint64_t i = 0; i < kv_count; ++i) {
    std::string key = in.string();
    const uint32_t type = in.get<uint32_t>();
    json value = read_value(in, type, path_, key, 0);
    RS_CHECK(!metadata_.contains(key), "{}: metadata key '{}' appears twice", path_.string(), key);
    metadata_[key] = std::move(value);
  }
  uint64_t alignment = 32;
  if (metadata_.contains("general.alignment")) {
    const json& a = metadata_["general.alignment"];
    RS_CHECK(a.is_number_unsigned() && a.get<uint64_t>() > 0 && (a.get<uint64_t>() & (a.get<uint64_t>() - 1)) == 0,
             "{}: general.alignment {} is not a power of two", path_.string(), shown(a));
    alignment = a.get<uint64_t>();
  }
  struct Pending {
    uint64_t offset;
  };
  std::vector<Pending> offsets;
  for (uint64_t i = 0; i < tensor_count; ++i) {
    TensorRecord record;
    record.name = in.string();
    const uint32_t dims = in.get<uint32_t>();
    RS_CHECK(dims >= 1 && dims <= kMaxDims, "{}: tensor '{}' has {} dimensions (1 to {})", path_.string(), record.name,
             dims, kMaxDims);
    uint64_t elements = 1;
    for (uint32_t d = 0; d < dims; ++d) {
      const uint64_t n = in.get<uint64_t>();
      RS_CHECK(n > 0 && n <= (uint64_t{1} << 40) && elements <= (uint64_t{1} << 50) / n,
               "{}: tensor '{}' has an empty or impossible size", path_.string(), record.name);
      elements *= n;
      record.ne.push_back(static_cast<int64_t>(n));
    }
    record.type = static_cast<GgmlType>(in.get<uint32_t>());
    offsets.push_back({in.get<uint64_t>()});
    const BlockShape block = block_shape(record.type);
    if (block.elements > 0) {
      RS_CHECK(record.ne[0] % block.elements == 0, "{}: tensor '{}' ({}) has rows of {} elements, not a multiple of {}",
               path_.string(), record.name, type_name(record.type), record.ne[0], block.elements);
      record.bytes = elements / block.elements * block.bytes;
    }
    tensors_.push_back(std::move(record));
  }
  const uint64_t data_start = (in.pos() + alignment - 1) / alignment * alignment;
  RS_CHECK(data_start <= size || tensor_count == 0, "{}: truncated GGUF (no data section)", path_.string());
  for (size_t i = 0; i < tensors_.size(); ++i) {
    TensorRecord& record = tensors_[i];
    const uint64_t offset = offsets[i].offset;
    RS_CHECK(offset <= size - data_start && record.bytes <= size - data_start - offset,
             "{}: tensor '{}' ({} bytes at data offset {}) runs past the end of the file ({} bytes; truncated?)",
             path_.string(), record.name, record.bytes, offset, size);
    record.data = data + data_start + offset;
  }
}

}  // namespace rs::loader::gguf
