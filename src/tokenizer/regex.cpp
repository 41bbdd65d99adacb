// PCRE2 wrapper and the Oniguruma -> PCRE2 escape translation.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/regex.h"

#include <pcre2.h>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/utf8.h"

namespace rs::tokenizer {
namespace {

// Unicode White_Space (Unicode 14-16 agree): what Oniguruma's `\s` matches in Unicode mode.
constexpr std::string_view kWhiteSpace =
    "\\t\\n\\x0B\\f\\r\\x20\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}"
    "\\x{202F}\\x{205F}\\x{3000}";
constexpr std::string_view kWordChars = "\\p{L}\\p{M}\\p{N}\\p{Pc}";
constexpr std::string_view kHexDigits = "0-9A-Fa-f";

struct MatchDataDeleter {
  void operator()(pcre2_match_data* data) const { pcre2_match_data_free(data); }
};

// Copies an escape's argument such as `{...}` in `\p{L}` or `\x{41}` when present.
std::size_t copy_braced(std::string_view pattern, std::size_t pos, std::string& out) {
  if (pos < pattern.size() && pattern[pos] == '{') {
    const std::size_t close = pattern.find('}', pos);
    RS_CHECK(close != std::string_view::npos, "regex: unterminated '{{' in pattern {}", pattern);
    out.append(pattern.substr(pos, close + 1 - pos));
    return close + 1;
  }
  return pos;
}

}  // namespace

std::string translate_pattern(std::string_view pattern) {
  std::string out;
  out.reserve(pattern.size() + 64);
  bool in_class = false;
  std::size_t pos = 0;
  while (pos < pattern.size()) {
    const char c = pattern[pos];
    if (c == '[' && !in_class) {
      in_class = true;
      out.push_back(c);
      ++pos;
      if (pos < pattern.size() && pattern[pos] == '^') out.push_back(pattern[pos++]);
      if (pos < pattern.size() && pattern[pos] == ']') out.push_back(pattern[pos++]);  // literal
      continue;
    }
    if (c == '[' && in_class && pattern.substr(pos, 2) == "[:") {  // POSIX class [:alpha:]
      const std::size_t close = pattern.find(":]", pos + 2);
      RS_CHECK(close != std::string_view::npos, "regex: unterminated POSIX class in {}", pattern);
      out.append(pattern.substr(pos, close + 2 - pos));
      pos = close + 2;
      continue;
    }
    if (c == '[' && in_class) RS_FAIL("unsupported tokenizer regex: nested class in {}", pattern);
    if (c == ']' && in_class) in_class = false;
    if (c != '\\') {
      out.push_back(c);
      ++pos;
      continue;
    }
    RS_CHECK(pos + 1 < pattern.size(), "regex: pattern ends with a backslash: {}", pattern);
    const char escape = pattern[pos + 1];
    pos += 2;
    auto set = [&](std::string_view members, bool negated) {
      if (in_class) {
        RS_CHECK(!negated, "unsupported tokenizer regex: negated \\{} inside a class in {}", escape, pattern);
        out.append(members);
      } else {
        out.append(negated ? "[^" : "[").append(members).push_back(']');
      }
    };
    switch (escape) {
      case 's': set(kWhiteSpace, false); break;
      case 'S': set(kWhiteSpace, true); break;
      case 'w': set(kWordChars, false); break;
      case 'W': set(kWordChars, true); break;
      case 'h': set(kHexDigits, false); break;
      case 'H': set(kHexDigits, true); break;
      case 'v': out.append("\\x0B"); break;
      case 'Q': RS_FAIL("unsupported tokenizer regex: \\Q...\\E quoting in {}", pattern);
      case 'p':
      case 'P':
      case 'x':
        out.push_back('\\');
        out.push_back(escape);
        pos = copy_braced(pattern, pos, out);
        break;
      default: {
        out.push_back('\\');
        out.push_back(escape);
        // A multi-byte escaped character: copy its continuation bytes too.
        while (pos < pattern.size() && (static_cast<unsigned char>(pattern[pos]) & 0xC0) == 0x80) {
          out.push_back(pattern[pos++]);
        }
      }
    }
  }
  return out;
}

void Regex::CodeDeleter::operator()(pcre2_real_code_8* code) const { pcre2_code_free(code); }

Regex::Regex(std::string_view pattern) {
  const std::string translated = translate_pattern(pattern);
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  code_.reset(pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(), PCRE2_UTF | PCRE2_UCP,
                            &error_code, &error_offset, nullptr));
  if (!code_) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error_code, message, sizeof(message));
    RS_FAIL("tokenizer regex does not compile at offset {}: {} (pattern {})", error_offset,
            reinterpret_cast<const char*>(message), pattern);
  }
  // Without JIT (e.g. an unsupported CPU) matching still works through the interpreter.
  pcre2_jit_compile(code_.get(), PCRE2_JIT_COMPLETE);
}

Regex::Regex(Regex&&) noexcept = default;
Regex& Regex::operator=(Regex&&) noexcept = default;
Regex::~Regex() = default;

void Regex::find_all(std::string_view text, std::vector<Match>& matches) const {
  // One ovector pair is enough: only the whole match is read.
  std::unique_ptr<pcre2_match_data, MatchDataDeleter> data(pcre2_match_data_create(1, nullptr));
  RS_CHECK(data != nullptr, "regex: out of memory");
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  std::size_t search_from = 0;
  std::size_t last_match_end = std::string_view::npos;
  while (search_from <= text.size()) {
    int rc = pcre2_match(code_.get(), subject, text.size(), search_from, PCRE2_NO_UTF_CHECK, data.get(), nullptr);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {  // very long backtracking: retry on the heap
      rc = pcre2_match(code_.get(), subject, text.size(), search_from, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, data.get(),
                       nullptr);
    }
    if (rc == PCRE2_ERROR_NOMATCH) break;
    RS_CHECK(rc >= 0, "tokenizer regex match failed with PCRE2 error {}", rc);
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(data.get());
    const Match match{ovector[0], ovector[1]};
    if (match.begin == match.end && match.end == last_match_end) {
      if (search_from == text.size()) break;
      const std::size_t length = utf8::sequence_length(text, search_from);
      search_from += length == 0 ? 1 : length;
      continue;
    }
    matches.push_back(match);
    search_from = match.end;
    last_match_end = match.end;
  }
}

Pattern Pattern::from_json(const nlohmann::json& config) {
  Pattern pattern;
  if (config.contains("String")) {
    pattern.literal_ = config.at("String").get<std::string>();
  } else if (config.contains("Regex")) {
    pattern.regex_.emplace(config.at("Regex").get<std::string>());
  } else {
    RS_FAIL("unsupported tokenizer pattern {} (expected String or Regex)", config.dump());
  }
  return pattern;
}

void Pattern::find_all(std::string_view text, std::vector<Match>& matches) const {
  if (regex_) {
    regex_->find_all(text, matches);
    return;
  }
  if (literal_.empty()) return;
  for (std::size_t pos = text.find(literal_); pos != std::string_view::npos;
       pos = text.find(literal_, pos + literal_.size())) {
    matches.push_back({pos, pos + literal_.size()});
  }
}

std::optional<std::string_view> Pattern::literal() const {
  if (regex_) return std::nullopt;
  return std::string_view(literal_);
}

}  // namespace rs::tokenizer
