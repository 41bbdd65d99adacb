// One GGUF file (llama.cpp's single-file format, version 2 or 3): a header, typed key-value metadata, tensor records
// and an aligned data section, mmap'd and validated fully so that every later read stays inside the mapping.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace rs::loader::gguf {

// ggml tensor types (ggml.h's enum ggml_type values, as GGUF stores them).
enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kBF16 = 30,
  kMXFP4 = 39,
};

struct TensorRecord {
  std::string name;
  GgmlType type;
  std::vector<int64_t> ne;        // ggml order: ne[0] varies fastest (a [out, in] matrix has ne = {in, out})
  const uint8_t* data = nullptr;  // inside the mapping
  size_t bytes = 0;               // 0: a type radixserve cannot size (GgufWeights refuses such a tensor if it needs it)
};

class GgufFile {
 public:
  explicit GgufFile(const std::filesystem::path& path);
  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  // Parses `size` bytes already in memory (owned by the caller), for tests and fuzzing; `path` names it in errors.
  GgufFile(const std::filesystem::path& path, const uint8_t* data, size_t size);

  const std::filesystem::path& path() const { return path_; }
  uint32_t version() const { return version_; }
  // Metadata as JSON values: integers, floats, booleans, strings and arrays of them (nested arrays too).
  const nlohmann::json& metadata() const { return metadata_; }
  const std::vector<TensorRecord>& tensors() const { return tensors_; }

 private:
  void parse(const uint8_t* data, size_t size);

  std::filesystem::path path_;
  void* mapping_ = nullptr;
  size_t mapped_size_ = 0;
  uint32_t version_ = 0;
  nlohmann::json metadata_ = nlohmann::json::object();
  std::vector<TensorRecord> tensors_;
};

// Whether a file starts with the GGUF magic.
bool is_gguf(const std::filesystem::path& path);
// A metadata value as JSON text for an error message; bytes that are not UTF-8 (the file's strings are unchecked)
// print as U+FFFD instead of throwing.
std::string shown(const nlohmann::json& value);

// Bytes per block and elements per block of a ggml type; {0, 0} for a type radixserve cannot read.
struct BlockShape {
  size_t bytes = 0;
  int64_t elements = 0;
};
BlockShape block_shape(GgmlType type);
// "Q4_K", "BF16", ... (the ggml name), or "type N" for an unknown value.
std::string type_name(GgmlType type);

}  // namespace rs::loader::gguf
