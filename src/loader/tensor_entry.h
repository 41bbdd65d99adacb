// Where one tensor of a weights file lies in that file's bytes: what the format parsers produce.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tensor/dtype.h"

namespace rs::loader {

struct TensorEntry {
  DType dtype;
  std::vector<int64_t> shape;
  size_t offset;  // from the start of the file
  size_t bytes;
};

using TensorEntries = std::map<std::string, TensorEntry>;

}  // namespace rs::loader
