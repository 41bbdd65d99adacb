// Tag detection shared by the streaming chat-output parsers (reasoning, tool calls).
#pragma once

#include <algorithm>
#include <string_view>

namespace rs::server {

// Length of the longest suffix of `text` that is a proper prefix of `tag`: what a streaming parser holds back until
// the next piece shows whether the tag follows.
inline size_t partial_tag_suffix(std::string_view text, std::string_view tag) {
  for (size_t n = std::min(text.size(), tag.size() - 1); n > 0; --n)
    if (text.substr(text.size() - n) == tag.substr(0, n)) return n;
  return 0;
}

}  // namespace rs::server
