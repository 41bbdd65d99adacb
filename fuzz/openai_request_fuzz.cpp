// Request bodies of /v1/chat/completions and /v1/completions: any bytes must parse or give an ApiError, never crash.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "server/openai_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  const rs::engine::SamplingParams defaults{};
  if (data[0] & 1)
    (void)rs::server::parse_chat_request(body, defaults);
  else
    (void)rs::server::parse_completion_request(body, defaults);
  return 0;
}
