// A whole file mmap'd read-only (weights files: safetensors, PyTorch zips, GGUF), with errors that name the file.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string_view>

namespace rs::loader {

struct Mapping {
  void* data = nullptr;
  size_t size = 0;
};

// Maps `path`; fails when it cannot be opened, is not a regular file, or is shorter than `min_bytes` (`too_short`
// then says what the file was expected to be). The caller munmaps data/size.
Mapping map_readonly(const std::filesystem::path& path, size_t min_bytes, std::string_view too_short);

}  // namespace rs::loader
