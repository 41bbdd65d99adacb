// BpeModel: the tokenizer.json "model" of type BPE (vocab, merges, byte_fallback, unk,
// ignore_merges) turning one pre-tokenized piece into token ids.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "tokenizer/bpe_cache.h"
#include "tokenizer/bpe_merge.h"
#include "tokenizer/token_map.h"

namespace rs::tokenizer {

class BpeModel {
 public:
  // `config` is the "model" value. With `byte_level` (the pre-tokenizer has a ByteLevel step)
  // pieces arrive as raw bytes and the vocab is matched through the GPT-2 byte alphabet, so no
  // piece is ever converted; the vocab must then hold all 256 byte characters. Throws rs::Error
  // for other model types, dropout, or merges naming unknown tokens.
  static BpeModel from_json(const nlohmann::json& config, bool byte_level);

  // Appends the ids of one piece (HF BPE::tokenize). Thread-safe.
  void tokenize(std::string_view piece, std::vector<int32_t>& out) const;

  std::optional<int32_t> token_to_id(std::string_view token) const;
  // The vocab string of `id` (byte-level characters for byte-level models); empty if unknown.
  std::string_view id_to_token(int32_t id) const;
  // One past the largest vocab id.
  int32_t id_limit() const { return static_cast<int32_t>(id_to_token_.size()); }

 private:
  BpeModel();
  void initial_symbols_bytes(std::string_view piece, std::vector<int32_t>& symbols) const;
  void initial_symbols_chars(std::string_view piece, std::vector<int32_t>& symbols) const;
  int32_t unk_id() const;

  TokenMap vocab_;  // vocab string -> id
  std::vector<std::string> id_to_token_;
  TokenMap byte_vocab_;                // byte-level: raw bytes of each vocab string -> id
  std::array<int32_t, 256> byte_ids_;  // byte-level: id of each single-byte token
  MergeTable merges_;
  bool byte_level_ = false;
  bool ignore_merges_ = false;
  bool byte_fallback_ = false;
  bool fuse_unk_ = false;
  std::optional<std::string> unk_token_;
  std::string continuing_subword_prefix_;
  std::string end_of_word_suffix_;
  std::unique_ptr<BpeCache> cache_;  // behind a pointer: its mutexes cannot move
};

}  // namespace rs::tokenizer
