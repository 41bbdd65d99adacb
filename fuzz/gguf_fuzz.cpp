// GGUF files: any file must open with every tensor it maps readable, its config and tokenizer rebuilt, or be refused
// with rs::Error (the metadata sizes nothing that the file's bytes do not bound).
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "base/error.h"
#include "loader/gguf/gguf_config.h"
#include "loader/gguf/gguf_tokenizer.h"
#include "loader/gguf/gguf_weights.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = "/tmp/rs_fuzz_" + std::to_string(::getpid()) + ".gguf";
  FILE* file = std::fopen(path.c_str(), "wb");
  if (!file) return 0;
  std::fwrite(data, 1, size, file);
  std::fclose(file);
  try {
    const rs::loader::gguf::GgufWeights weights({path});
    for (const auto& name : weights.names()) {
      try {
        const rs::Tensor t = weights.tensor(name);
        const auto* bytes = static_cast<const volatile uint8_t*>(t.data());
        if (t.bytes() > 0) (void)(bytes[0] + bytes[t.bytes() - 1]);  // the view lies inside its buffer
      } catch (const rs::Error&) {
      }
    }
    try {
      (void)rs::loader::gguf::hf_config(weights);
    } catch (const rs::Error&) {
    }
    (void)rs::loader::gguf::hf_generation_config(weights.metadata());
    (void)rs::loader::gguf::hf_tokenizer(weights.metadata());
  } catch (const rs::Error&) {
  }
  return 0;
}
