// The data.pkl record of a torch.save'd state dict (pytorch_model.bin), read without running code: a small pickle
// machine that builds dicts, tuples and tensor references and refuses every callable that a state dict does not use.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tensor/dtype.h"

namespace rs::loader {

// One tensor of the state dict: where its elements lie inside which storage record ("<archive>/data/<key>").
struct PickledTensor {
  std::string name;
  std::string storage_key;
  DType dtype;
  int64_t storage_offset;  // in elements
  std::vector<int64_t> shape;
  std::vector<int64_t> stride;
};

// The tensors of the top-level dict in `pickle` (protocols 2-5, as torch.save writes them, torch 1.6 to 2.x:
// _rebuild_tensor_v2 over typed storages, _rebuild_tensor_v3 over untyped ones for float8 and uint16/32/64);
// entries that are not tensors are skipped. Anything else throws rs::Error naming `source`: a callable outside
// collections.OrderedDict and torch._utils' tensor and parameter rebuilders, a negated or conjugated view, tensors
// nested one dict down (named), a malformed stream, or one that builds far more than its size warrants.
std::vector<PickledTensor> read_pickled_state_dict(std::string_view pickle, const std::string& source);

}  // namespace rs::loader
