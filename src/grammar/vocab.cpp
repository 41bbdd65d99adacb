#include "grammar/vocab.h"

#include <algorithm>
#include <numeric>

#include "base/error.h"
#include "tokenizer/tokenizer.h"

namespace rs::grammar {

std::shared_ptr<const TokenVocab> TokenVocab::from_tokenizer(const tokenizer::Tokenizer& tokenizer) {
  const int32_t size = tokenizer.vocab_size();
  std::vector<std::string> bytes(size);
  std::vector<int32_t> special;
  for (int32_t id = 0; id < size; ++id) {
    if (tokenizer.is_special(id)) special.push_back(id);
    bytes[id] = tokenizer.token_bytes(id);
  }
  return from_bytes(std::move(bytes), special);
}

std::shared_ptr<const TokenVocab> TokenVocab::from_bytes(std::vector<std::string> token_bytes,
                                                         const std::vector<int32_t>& special) {
  auto vocab = std::make_shared<TokenVocab>();
  vocab->token_bytes_ = std::move(token_bytes);
  // Byte 0xFF never occurs in UTF-8 text, so no text grammar accepts an ordinary token holding it (byte-level
  // vocabularies have one); leaving those out makes a 0xFF prefix name special tokens alone.
  for (std::string& bytes : vocab->token_bytes_)
    if (bytes.find('\xFF') != std::string::npos) bytes.clear();
  for (int32_t id : special) {
    RS_CHECK(id >= 0 && id < vocab->size(), "special token id {} is outside the vocabulary", id);
    vocab->token_bytes_[id] = special_token_bytes(vocab->token_bytes_[id]);
  }
  vocab->build_trie();
  return vocab;
}

const std::string& TokenVocab::token_bytes(int32_t id) const {
  static const std::string kNone;
  return id >= 0 && id < size() ? token_bytes_[id] : kNone;
}

void TokenVocab::build_trie() {
  std::vector<int32_t> order;
  for (int32_t id = 0; id < size(); ++id)
    if (!token_bytes_[id].empty()) order.push_back(id);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return token_bytes_[a] != token_bytes_[b] ? token_bytes_[a] < token_bytes_[b] : a < b;
  });
  // Preorder construction from the sorted strings: nodes on the path of the previous string stay open while they
  // remain a prefix; a node's subtree ends where the first string that leaves it starts its new nodes.
  trie_.clear();
  trie_tokens_.clear();
  std::vector<uint32_t> open;  // node index per depth - 1
  const std::string* previous = nullptr;
  for (int32_t id : order) {
    const std::string& s = token_bytes_[id];
    size_t common = 0;
    if (previous != nullptr)
      while (common < s.size() && common < previous->size() && s[common] == (*previous)[common]) ++common;
    while (open.size() > common) {
      trie_[open.back()].subtree_end = static_cast<uint32_t>(trie_.size());
      open.pop_back();
    }
    for (size_t d = common; d < s.size(); ++d) {
      RS_CHECK(d < 65535, "token {} is longer than 65535 bytes", id);
      open.push_back(static_cast<uint32_t>(trie_.size()));
      trie_.push_back({.byte = static_cast<uint8_t>(s[d]), .depth = static_cast<uint16_t>(d + 1)});
    }
    TrieNode& last = trie_[open.back()];
    if (last.tokens_end == 0) last.tokens_begin = static_cast<uint32_t>(trie_tokens_.size());
    trie_tokens_.push_back(id);
    last.tokens_end = static_cast<uint32_t>(trie_tokens_.size());
    previous = &s;
  }
  for (uint32_t node : open) trie_[node].subtree_end = static_cast<uint32_t>(trie_.size());
}

}  // namespace rs::grammar
