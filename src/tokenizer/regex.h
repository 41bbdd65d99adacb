// Regex: the Oniguruma patterns of tokenizer.json, compiled with PCRE2 (UTF + UCP + JIT).
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

struct pcre2_real_code_8;

namespace rs::tokenizer {

struct Match {
  std::size_t begin;  // byte offsets into the searched text
  std::size_t end;
};

class Regex {
 public:
  // Compiles an Oniguruma (Ruby syntax) pattern as HF tokenizers writes it. Escapes whose meaning
  // differs between Oniguruma and PCRE2 are rewritten (see translate_pattern). Throws rs::Error
  // when the pattern does not compile or uses a construct we cannot translate.
  explicit Regex(std::string_view pattern);
  Regex(Regex&&) noexcept;
  Regex& operator=(Regex&&) noexcept;
  ~Regex();

  // Appends every match in `text` (valid UTF-8), left to right and non-overlapping, to `matches`.
  // Empty matches follow Rust onig's find_iter: one right after the previous match is skipped.
  // Thread-safe (match state is per call).
  void find_all(std::string_view text, std::vector<Match>& matches) const;

 private:
  struct CodeDeleter {
    void operator()(pcre2_real_code_8* code) const;
  };
  std::unique_ptr<pcre2_real_code_8, CodeDeleter> code_;
};

// A tokenizer.json pattern: {"String": literal} (matched as is) or {"Regex": oniguruma}.
class Pattern {
 public:
  static Pattern from_json(const nlohmann::json& config);
  // Same contract as Regex::find_all; an empty literal never matches.
  void find_all(std::string_view text, std::vector<Match>& matches) const;
  // The literal when this is a String pattern, nullopt for a Regex.
  std::optional<std::string_view> literal() const;

 private:
  std::string literal_;
  std::optional<Regex> regex_;
};

// Rewrites an Oniguruma pattern for PCRE2 with UCP: `\s` becomes the White_Space set (PCRE2 also
// counts U+180E), `\w` becomes Letter|Mark|Number|Connector_Punctuation (PCRE2 omits marks),
// `\h` is a hex digit and `\v` a vertical tab in Ruby syntax. Everything else passes through.
std::string translate_pattern(std::string_view pattern);

}  // namespace rs::tokenizer
