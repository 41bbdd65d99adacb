// AddedVocabulary: the tokenizer.json "added_tokens" (special and plain), found in the text by
// leftmost-longest matching before normalization and BPE, with lstrip/rstrip/single_word.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/normalizer.h"
#include "tokenizer/string_map.h"

namespace rs::tokenizer {

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool single_word = false;  // match only when not bordered by word characters
  bool lstrip = false;       // the match swallows whitespace on its left
  bool rstrip = false;       // ... and on its right
  bool normalized = true;    // match against normalized text instead of the raw input
  bool special = false;      // dropped by decode(skip_special_tokens = true)
};

// One piece of a split: an added token (id >= 0) or text to encode further (id < 0).
struct Segment {
  std::size_t begin;  // byte offsets into the split text
  std::size_t end;
  int32_t id;
};

class AddedVocabulary {
 public:
  // `tokens` carry their final ids. Contents of `normalized` tokens are matched in their
  // normalized form, as HF does.
  AddedVocabulary(std::vector<AddedToken> tokens, const Normalizer& normalizer);

  // HF AddedVocabulary::find_matches: appends segments covering `text` (valid UTF-8), matching the
  // non-normalized tokens (normalized_set = false, on raw input) or the normalized ones.
  void split(std::string_view text, bool normalized_set, std::vector<Segment>& out) const;

  bool has_normalized_tokens() const { return !normalized_matcher_.empty(); }
  const AddedToken* find(int32_t id) const;
  std::optional<int32_t> token_to_id(std::string_view content) const;
  const std::vector<AddedToken>& tokens() const { return tokens_; }

 private:
  // Byte trie answering "longest token starting here" for leftmost-longest scanning.
  class Matcher {
   public:
    void add(std::string_view pattern, int32_t token_index);
    bool empty() const { return nodes_.size() <= 1; }
    // Longest pattern starting at text[pos]: {length, token index}, or length 0.
    std::pair<std::size_t, int32_t> longest_at(std::string_view text, std::size_t pos) const;
    bool may_start(unsigned char byte) const { return first_bytes_[byte]; }

   private:
    struct Node {
      std::vector<std::pair<unsigned char, int32_t>> children;  // byte -> node index
      int32_t token_index = -1;                                 // a pattern ends here
    };
    std::vector<Node> nodes_{Node{}};
    std::array<bool, 256> first_bytes_{};
  };

  std::vector<AddedToken> tokens_;
  StringMap<int32_t> content_to_index_;
  std::vector<int32_t> id_to_index_;  // dense by id, -1 where the id is not an added token
  Matcher raw_matcher_;
  Matcher normalized_matcher_;
};

}  // namespace rs::tokenizer
