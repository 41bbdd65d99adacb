// PyTorch's zip checkpoints (torch.save since 1.6: pytorch_model.bin): the archive's records are found through its
// central directory, the state dict through data.pkl, and every tensor becomes a view of its storage record, which
// torch stores uncompressed, so weights are used in place from the mapping as safetensors are.
#pragma once

#include <cstdint>
#include <filesystem>

#include "loader/tensor_entry.h"

namespace rs::loader {

// Whether `data` starts as a zip archive does.
bool looks_like_zip(const uint8_t* data, size_t size);

// The tensors of the zip checkpoint `data` (`size` bytes, read from `path`). Errors name the file and the tensor:
// a compressed or missing storage record, a tensor that is not contiguous or overruns its storage, a big-endian
// archive, or a pickle that is not a state dict.
TensorEntries parse_torch_zip(const std::filesystem::path& path, const uint8_t* data, size_t size);

}  // namespace rs::loader
