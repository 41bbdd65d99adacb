// The streaming parsers of model output (Qwen3 <tool_call> blocks, <think> reasoning): any text, cut into any pieces,
// must parse without crashing, and the reasoning split must lose no byte that is not a tag.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "server/reasoning_parser.h"
#include "server/tool_call_parser.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const size_t piece = 1 + data[0] % 16;  // the stream arrives in pieces of this many bytes
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  rs::server::ToolCallParser tools;
  rs::server::ReasoningParser reasoning("<think>", "</think>", (data[0] & 0x80) != 0);
  std::string split;
  for (size_t at = 0; at < text.size(); at += piece) {
    const std::string_view part = text.substr(at, piece);
    (void)tools.feed(part);
    const auto out = reasoning.feed(part);
    split += out.reasoning + out.content;
  }
  (void)tools.finish();
  const auto rest = reasoning.finish();
  split += rest.reasoning + rest.content;
  if (split.size() > text.size()) std::abort();  // tags are removed, nothing is invented
  return 0;
}
