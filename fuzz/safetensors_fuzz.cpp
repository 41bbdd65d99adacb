// .safetensors headers: any file must open with every tensor readable, or be refused with rs::Error.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "base/error.h"
#include "loader/checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = "/tmp/rs_fuzz_" + std::to_string(::getpid()) + ".safetensors";
  FILE* file = std::fopen(path.c_str(), "wb");
  if (!file) return 0;
  std::fwrite(data, 1, size, file);
  std::fclose(file);
  try {
    rs::loader::CheckpointFile st(path);
    for (const auto& [name, entry] : st.entries()) {
      const rs::Tensor t = st.tensor(name);
      const auto* bytes = static_cast<const volatile uint8_t*>(t.data());
      if (t.bytes() > 0) (void)(bytes[0] + bytes[t.bytes() - 1]);  // the view lies inside the mapping
    }
  } catch (const rs::Error&) {
  }
  return 0;
}
