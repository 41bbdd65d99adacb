// StringMap<V>: an unordered_map keyed by std::string that accepts std::string_view lookups.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace rs::tokenizer {

struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view text) const { return std::hash<std::string_view>{}(text); }
};

template <typename Value>
using StringMap = std::unordered_map<std::string, Value, StringHash, std::equal_to<>>;

}  // namespace rs::tokenizer
