// Request bodies of /v1/chat/completions, /v1/completions, /v1/messages (Anthropic), /v1/responses and /v1/embeddings:
// any bytes must parse (or translate into the chat they stand for) or give an ApiError, never crash or throw.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "server/anthropic_messages.h"
#include "server/openai_embeddings.h"
#include "server/openai_request.h"
#include "server/openai_responses.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  const rs::engine::SamplingParams defaults{};
  if (data[0] == 4) {  // the other selector values keep their meaning for the committed seeds
    (void)rs::server::parse_embedding_request(body, rs::server::RequestLimits{});
    return 0;
  }
  switch (data[0] & 3) {
    case 0: (void)rs::server::parse_completion_request(body, defaults); break;
    case 1: (void)rs::server::parse_chat_request(body, defaults); break;
    case 2: {
      auto chat = rs::server::anthropic_to_chat(std::string(body));
      if (auto* translated = std::get_if<nlohmann::ordered_json>(&chat))
        (void)rs::server::parse_chat_request(translated->dump(), defaults);
      break;
    }
    default: {
      static rs::server::ResponseStore store;
      auto call = rs::server::responses_to_chat(std::string(body), store);
      if (auto* translated = std::get_if<rs::server::ResponsesCall>(&call))
        (void)rs::server::parse_chat_request(translated->chat.dump(), defaults);
    }
  }
  return 0;
}
