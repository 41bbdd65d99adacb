// Added-token matching (HF tokenizers tokenizer/added_vocabulary.rs semantics).
#include "tokenizer/added_tokens.h"

#include <algorithm>

#include "base/error.h"
#include "base/utf8.h"
#include "tokenizer/unicode.h"

namespace rs::tokenizer {
namespace {

// Start of the code point that ends at byte `end` (exclusive) in valid UTF-8.
std::size_t previous_char(std::string_view text, std::size_t end) {
  std::size_t start = end - 1;
  while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
  return start;
}

char32_t char_at(std::string_view text, std::size_t pos) {
  return utf8::decode(text, pos, utf8::sequence_length(text, pos));
}

// Rust regex `\w$` on text[..end] and `^\w` on text[begin..].
bool ends_with_word(std::string_view text, std::size_t end) {
  return end > 0 && unicode::is_word_char(char_at(text, previous_char(text, end)));
}
bool starts_with_word(std::string_view text, std::size_t begin) {
  return begin < text.size() && unicode::is_word_char(char_at(text, begin));
}

// `\s*$` on text[..end]: where the trailing whitespace run starts.
std::size_t whitespace_run_before(std::string_view text, std::size_t end) {
  while (end > 0) {
    const std::size_t start = previous_char(text, end);
    if (!unicode::is_whitespace(char_at(text, start))) break;
    end = start;
  }
  return end;
}

// `^\s*` on text[begin..]: where the leading whitespace run ends.
std::size_t whitespace_run_after(std::string_view text, std::size_t begin) {
  while (begin < text.size()) {
    const std::size_t length = utf8::sequence_length(text, begin);
    if (!unicode::is_whitespace(utf8::decode(text, begin, length))) break;
    begin += length;
  }
  return begin;
}

}  // namespace

void AddedVocabulary::Matcher::add(std::string_view pattern, int32_t token_index) {
  int32_t node = 0;
  for (const char c : pattern) {
    const auto byte = static_cast<unsigned char>(c);
    auto& children = nodes_[node].children;
    auto it = std::find_if(children.begin(), children.end(), [&](const auto& child) { return child.first == byte; });
    if (it != children.end()) {
      node = it->second;
      continue;
    }
    const auto next = static_cast<int32_t>(nodes_.size());
    children.emplace_back(byte, next);
    nodes_.emplace_back();
    node = next;
  }
  // Two tokens with the same pattern: the first listed wins, as in the Aho-Corasick automaton.
  if (nodes_[node].token_index < 0) nodes_[node].token_index = token_index;
  first_bytes_[static_cast<unsigned char>(pattern.front())] = true;
}

std::pair<std::size_t, int32_t> AddedVocabulary::Matcher::longest_at(std::string_view text, std::size_t pos) const {
  std::pair<std::size_t, int32_t> best{0, -1};
  int32_t node = 0;
  for (std::size_t i = pos; i < text.size(); ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    const auto& children = nodes_[node].children;
    const auto it =
        std::find_if(children.begin(), children.end(), [&](const auto& child) { return child.first == byte; });
    if (it == children.end()) break;
    node = it->second;
    if (nodes_[node].token_index >= 0) best = {i + 1 - pos, nodes_[node].token_index};
  }
  return best;
}

AddedVocabulary::AddedVocabulary(std::vector<AddedToken> tokens, const Normalizer& normalizer)
    : tokens_(std::move(tokens)) {
  for (std::size_t i = 0; i < tokens_.size(); ++i) {
    const AddedToken& token = tokens_[i];
    RS_CHECK(token.id >= 0, "added token '{}' has no id", token.content);
    if (token.content.empty()) continue;  // HF ignores empty added tokens
    const auto index = static_cast<int32_t>(i);
    content_to_index_.try_emplace(token.content, index);
    if (static_cast<std::size_t>(token.id) >= id_to_index_.size()) {
      id_to_index_.resize(static_cast<std::size_t>(token.id) + 1, -1);
    }
    id_to_index_[token.id] = index;
    if (token.normalized) {
      const std::string pattern = normalizer.normalize(token.content);
      if (!pattern.empty()) normalized_matcher_.add(pattern, index);
    } else {
      raw_matcher_.add(token.content, index);
    }
  }
}

const AddedToken* AddedVocabulary::find(int32_t id) const {
  if (id < 0 || static_cast<std::size_t>(id) >= id_to_index_.size()) return nullptr;
  const int32_t index = id_to_index_[id];
  return index < 0 ? nullptr : &tokens_[index];
}

std::optional<int32_t> AddedVocabulary::token_to_id(std::string_view content) const {
  const auto it = content_to_index_.find(content);
  if (it == content_to_index_.end()) return std::nullopt;
  return tokens_[it->second].id;
}

void AddedVocabulary::split(std::string_view text, bool normalized_set, std::vector<Segment>& out) const {
  const Matcher& matcher = normalized_set ? normalized_matcher_ : raw_matcher_;
  std::size_t start_offset = 0;
  std::size_t pos = 0;
  while (!matcher.empty() && pos < text.size()) {
    if (!matcher.may_start(static_cast<unsigned char>(text[pos]))) {
      ++pos;
      continue;
    }
    const auto [length, index] = matcher.longest_at(text, pos);
    if (length == 0) {
      ++pos;
      continue;
    }
    std::size_t start = pos;
    std::size_t stop = pos + length;
    pos = stop;  // the automaton resumes after the match, whatever happens to it below
    const AddedToken& token = tokens_[index];
    if (token.single_word && (ends_with_word(text, start) || starts_with_word(text, stop))) {
      continue;  // not a whole word: the text stays text
    }
    if (token.lstrip) start = std::max(whitespace_run_before(text, start), start_offset);
    if (token.rstrip) stop = whitespace_run_after(text, stop);
    if (start_offset < start) out.push_back({start_offset, start, -1});
    out.push_back({start, stop, token.id});
    start_offset = stop;
  }
  if (start_offset < text.size()) out.push_back({start_offset, text.size(), -1});
}

}  // namespace rs::tokenizer
