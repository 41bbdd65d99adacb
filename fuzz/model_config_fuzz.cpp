// config.json: any JSON must give a ModelConfig or an rs::Error naming what is wrong.
#include <cstddef>
#include <cstdint>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "loader/hf_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const nlohmann::json config = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded()) return 0;
  try {
    (void)rs::loader::parse_model_config(config, "fuzz");
  } catch (const rs::Error&) {
  }
  return 0;
}
