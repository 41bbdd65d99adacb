// data.pkl of pytorch_model.bin: any byte stream must give a list of tensor references or be refused with rs::Error,
// never run code, loop, or leak (a pickle can build reference cycles through its memo).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/error.h"
#include "loader/torch_pickle.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto tensors =
        rs::loader::read_pickled_state_dict(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.pkl");
    for (const auto& t : tensors)
      if (t.shape.size() != t.stride.size()) __builtin_trap();
  } catch (const rs::Error&) {
  }
  return 0;
}
