// Structured output's parsers and matcher: any JSON Schema text, regex, GBNF grammar, choice list (a JSON array of
// strings) or json_object (the first byte picks which)
// either compiles or is refused with rs::Error; a compiled grammar then runs over the rest of the input as output
// bytes and fills a token mask over a small vocabulary, which must agree with trying each token.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "base/error.h"
#include "grammar/compiler.h"
#include "grammar/matcher.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  // The spec is the input up to the first NUL; what follows is output to match.
  const size_t split = input.find('\0');
  const std::string spec(input.substr(0, split));
  const std::string_view output = split == std::string_view::npos ? std::string_view() : input.substr(split + 1);
  static const auto vocab = rs::grammar::TokenVocab::from_bytes(
      {"{", "}", "\"", "a", "\":", " ", "1", "[", "]", ",", "true", "\xC3\xA9", "\xC3", "\\", "ab", "\"}"});
  rs::grammar::GrammarCompiler compiler(vocab);
  static constexpr rs::grammar::GrammarKind kKinds[] = {
      rs::grammar::GrammarKind::kJsonSchema, rs::grammar::GrammarKind::kRegex, rs::grammar::GrammarKind::kGbnf,
      rs::grammar::GrammarKind::kChoice, rs::grammar::GrammarKind::kJsonObject};
  constexpr size_t kNumKinds = sizeof(kKinds) / sizeof(kKinds[0]);
  std::shared_ptr<const rs::grammar::CompiledGrammar> grammar;
  try {
    grammar = compiler.compile({kKinds[data[0] % kNumKinds], spec});
  } catch (const rs::Error&) {
    return 0;
  }
  rs::grammar::GrammarMatcher matcher(grammar);
  for (size_t at = 0; at < output.size(); at += 3) {
    std::vector<uint32_t> mask(1);
    matcher.fill_next_token_bitmask(mask, {});
    for (int32_t id = 0; id < vocab->size(); ++id) {
      const bool allowed = (mask[0] >> id) & 1u;
      const bool accepted = matcher.accept_token(id);
      if (accepted) matcher.rollback(1);
      if (allowed != accepted) std::abort();
    }
    if (!matcher.accept_bytes(output.substr(at, 3))) break;
  }
  return 0;
}
