// TokenVocab: the bytes of every token a grammar may emit, and a byte trie over them in preorder, built once per
// tokenizer. A special token's bytes are 0xFF then its text (special_token_bytes): no text grammar produces 0xFF (it
// never occurs in UTF-8), so only a grammar that spells the token out that way (harmony headers) may emit it; stop
// tokens are allowed separately, when the grammar can finish.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace rs::tokenizer {
class Tokenizer;
}

namespace rs::grammar {

// The bytes that stand for special token `content` (e.g. "<|channel|>") in a vocabulary and in a grammar.
// (Built by append: g++ 12 warns falsely, -Wrestrict, on "literal" + std::string.)
inline std::string special_token_bytes(std::string_view content) {
  std::string bytes(1, '\xFF');
  bytes.append(content);
  return bytes;
}

struct TrieNode {
  uint8_t byte = 0;           // the byte on the edge into this node
  uint16_t depth = 0;         // 1 for a child of the root
  uint32_t subtree_end = 0;   // index of the first node after this node's subtree
  uint32_t tokens_begin = 0;  // tokens whose bytes end here: TokenVocab::trie_tokens[tokens_begin, tokens_end)
  uint32_t tokens_end = 0;
};

class TokenVocab {
 public:
  // From a loaded tokenizer. Byte-level vocabularies (GPT-2 alphabet: Qwen, Llama 3, gpt-oss) map back to raw bytes;
  // others (SentencePiece) read U+2581 as a space and <0xXX> as a byte.
  static std::shared_ptr<const TokenVocab> from_tokenizer(const tokenizer::Tokenizer& tokenizer);
  // From explicit token bytes (tests); ids in `special` are special tokens (special_token_bytes of their bytes).
  static std::shared_ptr<const TokenVocab> from_bytes(std::vector<std::string> token_bytes,
                                                      const std::vector<int32_t>& special = {});

  int32_t size() const { return static_cast<int32_t>(token_bytes_.size()); }
  // Raw bytes of token `id` (empty for ids out of range).
  const std::string& token_bytes(int32_t id) const;
  const std::vector<TrieNode>& trie() const { return trie_; }
  const std::vector<int32_t>& trie_tokens() const { return trie_tokens_; }

 private:
  void build_trie();

  std::vector<std::string> token_bytes_;
  std::vector<TrieNode> trie_;
  std::vector<int32_t> trie_tokens_;
};

}  // namespace rs::grammar
