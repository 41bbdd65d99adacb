// The safetensors format: an 8-byte header length, a JSON header naming every tensor's dtype, shape and byte range,
// then the data. Validated fully: every error names the file and the tensor.
#pragma once

#include <cstdint>
#include <filesystem>

#include "loader/tensor_entry.h"

namespace rs::loader {

// The tensors of the safetensors file `data` (`size` bytes, read from `path`).
TensorEntries parse_safetensors(const std::filesystem::path& path, const uint8_t* data, size_t size);

}  // namespace rs::loader
