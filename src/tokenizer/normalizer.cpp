// Normalizer steps, following HF tokenizers' normalizers/ semantics.
#include "tokenizer/normalizer.h"

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/utf8.h"

namespace rs::tokenizer {
namespace {

std::string apply_replace(std::string_view text, const Pattern& pattern, const std::string& content) {
  std::vector<Match> matches;
  pattern.find_all(text, matches);
  if (matches.empty()) return std::string(text);
  std::string out;
  std::size_t copied = 0;
  for (const Match& match : matches) {
    out.append(text.substr(copied, match.begin - copied)).append(content);
    copied = match.end;
  }
  out.append(text.substr(copied));
  return out;
}

std::string apply_strip(std::string_view text, bool left, bool right) {
  std::size_t begin = 0;
  std::size_t end = text.size();
  if (left) {
    while (begin < end) {
      const std::size_t length = utf8::sequence_length(text, begin);
      if (length == 0 || !unicode::is_whitespace(utf8::decode(text, begin, length))) break;
      begin += length;
    }
  }
  if (right) {
    while (end > begin) {
      std::size_t start = end - 1;
      while (start > begin && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
      const std::size_t length = utf8::sequence_length(text, start);
      if (length == 0 || !unicode::is_whitespace(utf8::decode(text, start, length))) break;
      end = start;
    }
  }
  return std::string(text.substr(begin, end - begin));
}

}  // namespace

void Normalizer::append_steps(const nlohmann::json& config, std::vector<Step>& steps) {
  const std::string type = config.at("type").get<std::string>();
  if (type == "Sequence") {
    for (const auto& child : config.at("normalizers")) append_steps(child, steps);
  } else if (type == "NFC") {
    steps.emplace_back(Unicode{unicode::NormalForm::kNfc});
  } else if (type == "NFD") {
    steps.emplace_back(Unicode{unicode::NormalForm::kNfd});
  } else if (type == "NFKC") {
    steps.emplace_back(Unicode{unicode::NormalForm::kNfkc});
  } else if (type == "NFKD") {
    steps.emplace_back(Unicode{unicode::NormalForm::kNfkd});
  } else if (type == "Lowercase") {
    steps.emplace_back(Lowercase{});
  } else if (type == "Replace") {
    steps.emplace_back(Replace{Pattern::from_json(config.at("pattern")), config.at("content").get<std::string>()});
  } else if (type == "Prepend") {
    steps.emplace_back(Prepend{config.at("prepend").get<std::string>()});
  } else if (type == "Strip") {
    steps.emplace_back(Strip{config.value("strip_left", true), config.value("strip_right", true)});
  } else {
    RS_FAIL("unsupported tokenizer.json feature: normalizer type '{}'", type);
  }
}

Normalizer Normalizer::from_json(const nlohmann::json& config) {
  Normalizer normalizer;
  if (!config.is_null()) append_steps(config, normalizer.steps_);
  return normalizer;
}

std::string Normalizer::normalize(std::string_view text) const {
  std::string current(text);
  for (const Step& step : steps_) {
    if (const auto* form = std::get_if<Unicode>(&step)) {
      current = unicode::normalize(current, form->form);
    } else if (std::holds_alternative<Lowercase>(step)) {
      current = unicode::to_lower(current);
    } else if (const auto* replace = std::get_if<Replace>(&step)) {
      current = apply_replace(current, replace->pattern, replace->content);
    } else if (const auto* prepend = std::get_if<Prepend>(&step)) {
      if (!current.empty()) current.insert(0, prepend->prefix);
    } else if (const auto* strip = std::get_if<Strip>(&step)) {
      current = apply_strip(current, strip->left, strip->right);
    }
  }
  return current;
}

}  // namespace rs::tokenizer
