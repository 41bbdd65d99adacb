// The tokenizer on arbitrary bytes (a test fixture's byte-level BPE tokenizer.json): encoding never crashes, and for
// valid UTF-8 decoding what was encoded gives the text back.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "base/error.h"
#include "tokenizer/tokenizer.h"

namespace {

bool valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    uint32_t cp = n == 1 ? c : c & (0x7f >> n);
    for (size_t k = 1; k < n; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff))
      return false;
    i += n;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const rs::tokenizer::Tokenizer tokenizer =
      rs::tokenizer::Tokenizer::load(std::string(RS_SOURCE_DIR) + "/tests/e2e/fixtures/tiny-chat");
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<int32_t> ids;
  try {
    ids = tokenizer.encode(text, /*add_special_tokens=*/false);
  } catch (const rs::Error&) {
    return 0;  // refusing a string is allowed; crashing is not
  }
  const std::string back = tokenizer.decode(ids, /*skip_special_tokens=*/false);
  if (valid_utf8(text) && back != text && text.find("<|") == std::string_view::npos) std::abort();
  return 0;
}
