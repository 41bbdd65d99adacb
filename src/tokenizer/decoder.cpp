// Decoder steps (HF tokenizers decoders/ semantics) plus the streaming "open" rules.
#include "tokenizer/decoder.h"

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/utf8.h"
#include "tokenizer/byte_level.h"

namespace rs::tokenizer {
namespace {

char32_t single_char(const std::string& text, const char* what) {
  const std::size_t length = text.empty() ? 0 : utf8::sequence_length(text, 0);
  RS_CHECK(length > 0 && length == text.size(), "{} must be one character, got '{}'", what, text);
  return utf8::decode(text, 0, length);
}

std::vector<char32_t> to_chars(const std::string& text) {
  std::vector<char32_t> chars;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t length = utf8::sequence_length(text, pos);
    RS_CHECK(length > 0, "decoder: invalid UTF-8 in token");
    chars.push_back(utf8::decode(text, pos, length));
    pos += length;
  }
  return chars;
}

std::string from_chars(const std::vector<char32_t>& chars, std::size_t begin, std::size_t end) {
  std::string out;
  for (std::size_t i = begin; i < end; ++i) utf8::append(out, chars[i]);
  return out;
}

// "<0xAB>" -> 0xAB, as HF's ByteFallback parses it.
std::optional<uint8_t> byte_token(const std::string& token) {
  if (token.size() != 6 || !token.starts_with("<0x") || token.back() != '>') return std::nullopt;
  unsigned value = 0;
  for (std::size_t i = 3; i < 5; ++i) {
    const char c = token[i];
    const int digit = c >= '0' && c <= '9'   ? c - '0'
                      : c >= 'A' && c <= 'F' ? c - 'A' + 10
                      : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                             : -1;
    if (digit < 0) return std::nullopt;
    value = value * 16 + static_cast<unsigned>(digit);
  }
  return static_cast<uint8_t>(value);
}

std::vector<std::string> byte_fallback(std::vector<std::string> tokens) {
  std::vector<std::string> out;
  std::string run;
  std::size_t run_tokens = 0;
  auto flush = [&] {
    if (run_tokens == 0) return;
    if (utf8::first_invalid(run) == std::string_view::npos) {
      out.push_back(run);
    } else {
      for (std::size_t i = 0; i < run_tokens; ++i) out.emplace_back("\xEF\xBF\xBD");  // U+FFFD
    }
    run.clear();
    run_tokens = 0;
  };
  for (std::string& token : tokens) {
    if (const auto byte = byte_token(token)) {
      run.push_back(static_cast<char>(*byte));
      ++run_tokens;
    } else {
      flush();
      out.push_back(std::move(token));
    }
  }
  flush();
  return out;
}

}  // namespace

void Decoder::append_steps(const nlohmann::json& config) {
  const std::string type = config.at("type").get<std::string>();
  if (type == "Sequence") {
    for (const auto& child : config.at("decoders")) append_steps(child);
  } else if (type == "ByteLevel") {
    steps_.emplace_back(ByteLevel{});
  } else if (type == "Replace") {
    steps_.emplace_back(Replace{Pattern::from_json(config.at("pattern")), config.at("content").get<std::string>()});
  } else if (type == "ByteFallback") {
    steps_.emplace_back(ByteFallback{});
  } else if (type == "Fuse") {
    steps_.emplace_back(Fuse{});
  } else if (type == "Strip") {
    steps_.emplace_back(Strip{single_char(config.at("content").get<std::string>(), "Strip content"),
                              config.at("start").get<std::size_t>(), config.at("stop").get<std::size_t>()});
  } else if (type == "Metaspace") {
    bool strip_first = config.value("prepend_scheme", std::string("always")) != "never";
    if (config.contains("add_prefix_space") && !config.at("add_prefix_space").get<bool>()) {
      strip_first = false;
    }
    steps_.emplace_back(
        Metaspace{single_char(config.at("replacement").get<std::string>(), "Metaspace replacement"), strip_first});
  } else {
    RS_FAIL("unsupported tokenizer.json feature: decoder type '{}'", type);
  }
}

Decoder Decoder::from_json(const nlohmann::json& config) {
  Decoder decoder;
  if (config.is_null()) {
    decoder.join_with_spaces_ = true;
  } else {
    decoder.append_steps(config);
  }
  return decoder;
}

std::string Decoder::decode(std::vector<std::string> tokens, DecodeContext& context) const {
  context.open = false;
  const bool streaming = !context.at_end;
  if (join_with_spaces_) {
    std::string out;
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      if (i > 0 || !context.at_start) out.push_back(' ');
      out += tokens[i];
    }
    return out;
  }
  // After ByteLevel or Fuse the list holds one string standing for the whole window: steps that
  // treat "the first/last token" specially then act on the sequence's start or end.
  bool collapsed = false;
  for (const Step& step : steps_) {
    if (std::holds_alternative<ByteLevel>(step)) {
      std::string bytes;
      for (const std::string& token : tokens) {
        if (auto raw = byte_level::decode(token))
          bytes += *raw;
        else
          bytes += token;  // not byte-level (e.g. an added token): its own UTF-8
      }
      if (streaming && utf8::incomplete_tail(bytes) > 0) context.open = true;
      tokens.assign(1, utf8::to_lossy(bytes));
      collapsed = true;
    } else if (const auto* replace = std::get_if<Replace>(&step)) {
      for (std::string& token : tokens) {
        std::vector<Match> matches;
        replace->pattern.find_all(token, matches);
        std::string replaced;
        std::size_t copied = 0;
        for (const Match& match : matches) {
          replaced.append(token, copied, match.begin - copied).append(replace->content);
          copied = match.end;
        }
        replaced.append(token, copied);
        if (collapsed && streaming) {
          // A match could still form across the window's end.
          const auto literal = replace->pattern.literal();
          if (!literal) context.open = true;
          for (std::size_t n = 1; literal && n < literal->size() && n <= token.size(); ++n) {
            if (token.ends_with(literal->substr(0, n))) context.open = true;
          }
        }
        token = std::move(replaced);
      }
    } else if (std::holds_alternative<ByteFallback>(step)) {
      if (collapsed) {
        // The one string is the whole text: only a sequence that is exactly "<0xAB>" converts.
        // A window is committed at the start only once it can no longer be or become one, so
        // past the start the whole text never is one.
        if (!context.at_start) continue;
        if (streaming && tokens[0].size() <= 6 &&
            std::string_view("<0x").starts_with(std::string_view(tokens[0]).substr(0, 3))) {
          context.open = true;
        }
      }
      if (streaming && !tokens.empty() && byte_token(tokens.back())) context.open = true;
      tokens = byte_fallback(std::move(tokens));
    } else if (std::holds_alternative<Fuse>(step)) {
      std::string fused;
      for (const std::string& token : tokens) fused += token;
      tokens.assign(1, std::move(fused));
      collapsed = true;
    } else if (const auto* strip = std::get_if<Strip>(&step)) {
      for (std::string& token : tokens) {
        const std::vector<char32_t> chars = to_chars(token);
        const bool strip_start = !collapsed || context.at_start;
        const bool strip_stop = !collapsed || context.at_end;
        std::size_t start_cut = 0;
        while (strip_start && start_cut < strip->start && start_cut < chars.size() &&
               chars[start_cut] == strip->content) {
          ++start_cut;
        }
        std::size_t stop_cut = chars.size();
        for (std::size_t i = 0; strip_stop && i < std::min(strip->stop, chars.size() - start_cut); ++i) {
          if (chars[stop_cut - 1] != strip->content) break;
          --stop_cut;
        }
        if (collapsed && streaming) {
          // Trailing content may be the sequence's end; a short all-content start may grow.
          if (strip->stop > 0 && !chars.empty() && chars.back() == strip->content) {
            context.open = true;
          }
          if (context.at_start && start_cut == chars.size() && chars.size() < strip->start) {
            context.open = true;
          }
        }
        token = from_chars(chars, start_cut, stop_cut);
      }
    } else if (const auto* metaspace = std::get_if<Metaspace>(&step)) {
      // HF drops every replacement character of the first token (not only the leading one).
      if (collapsed && streaming && metaspace->strip_first && context.at_start) {
        context.open = true;
      }
      for (std::size_t i = 0; i < tokens.size(); ++i) {
        const bool first = i == 0 && context.at_start && metaspace->strip_first;
        std::string out;
        for (const char32_t c : to_chars(tokens[i])) {
          if (c != metaspace->replacement)
            utf8::append(out, c);
          else if (!first)
            out.push_back(' ');
        }
        tokens[i] = std::move(out);
      }
    }
  }
  std::string text;
  for (const std::string& token : tokens) text += token;
  return text;
}

}  // namespace rs::tokenizer
