// The built-in web chat page served at GET / (src/server/web/chat.html, made into a string literal at build time by
// cmake/embed_text.cmake, so the binary needs no files at run time).
#pragma once

#include <string_view>

namespace rs::server {

// The page's HTML (UTF-8), in static storage; any thread.
std::string_view chat_page_html();

}  // namespace rs::server
