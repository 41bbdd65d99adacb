// Chat templates (--chat-template, model folders): any source must lex and parse or give a TemplateError.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "base/error.h"
#include "chat/template.h"
#include "chat/template_error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    (void)rs::chat::Template::parse(std::string_view(reinterpret_cast<const char*>(data), size));
  } catch (const rs::chat::TemplateError&) {
  } catch (const rs::Error&) {
  }
  return 0;
}
