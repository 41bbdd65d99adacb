#include "http/message.h"

#include <algorithm>
#include <cctype>

namespace rs::http {

static bool equal_ignoring_case(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

std::string_view find_header(const Headers& headers, std::string_view name) {
  for (const auto& [key, value] : headers)
    if (equal_ignoring_case(key, name)) return value;
  return {};
}

void Response::set_header(std::string name, std::string value) {
  for (auto& [key, old] : headers)
    if (equal_ignoring_case(key, name)) {
      old = std::move(value);
      return;
    }
  headers.emplace_back(std::move(name), std::move(value));
}

}  // namespace rs::http
