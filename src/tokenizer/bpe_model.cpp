// BPE model loading and per-piece tokenization (HF tokenizers models/bpe/model.rs semantics).
#include "tokenizer/bpe_model.h"

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/utf8.h"
#include "tokenizer/byte_level.h"

namespace rs::tokenizer {
namespace {

constexpr std::size_t kCacheCapacityPieces = 1 << 17;

std::string optional_string(const nlohmann::json& config, const char* key) {
  const auto it = config.find(key);
  return it == config.end() || it->is_null() ? std::string() : it->get<std::string>();
}

std::pair<std::string, std::string> parse_merge(const nlohmann::json& merge, std::size_t rank) {
  if (merge.is_array()) {
    RS_CHECK(merge.size() == 2, "BPE merge {} is not a pair", rank);
    return {merge[0].get<std::string>(), merge[1].get<std::string>()};
  }
  const std::string line = merge.get<std::string>();
  const std::size_t space = line.find(' ');
  RS_CHECK(space != std::string::npos && line.find(' ', space + 1) == std::string::npos,
           "BPE merge {} '{}' is not two space-separated tokens", rank, line);
  return {line.substr(0, space), line.substr(space + 1)};
}

}  // namespace

BpeModel::BpeModel() : cache_(std::make_unique<BpeCache>(kCacheCapacityPieces)) { byte_ids_.fill(-1); }

BpeModel BpeModel::from_json(const nlohmann::json& config, bool byte_level) {
  const std::string type = config.value("type", std::string("BPE"));
  RS_CHECK(type == "BPE", "unsupported tokenizer.json feature: model type '{}'", type);
  const auto dropout = config.find("dropout");
  RS_CHECK(dropout == config.end() || dropout->is_null() || dropout->get<double>() == 0.0,
           "unsupported tokenizer.json feature: BPE dropout");

  BpeModel model;
  model.byte_level_ = byte_level;
  model.ignore_merges_ = config.value("ignore_merges", false);
  model.byte_fallback_ = config.value("byte_fallback", false);
  model.fuse_unk_ = config.value("fuse_unk", false);
  if (const auto unk = config.find("unk_token"); unk != config.end() && !unk->is_null()) {
    model.unk_token_ = unk->get<std::string>();
  }
  model.continuing_subword_prefix_ = optional_string(config, "continuing_subword_prefix");
  model.end_of_word_suffix_ = optional_string(config, "end_of_word_suffix");
  RS_CHECK(!byte_level || (model.continuing_subword_prefix_.empty() && model.end_of_word_suffix_.empty()),
           "unsupported tokenizer.json feature: byte-level BPE with a subword prefix/suffix");

  const nlohmann::json& vocab = config.at("vocab");
  for (const auto& [token, id_json] : vocab.items()) {
    const auto id = id_json.get<int32_t>();
    RS_CHECK(id >= 0, "BPE vocab id {} of '{}' is negative", id, token);
    model.vocab_.insert(token, id);
    if (static_cast<std::size_t>(id) >= model.id_to_token_.size()) {
      model.id_to_token_.resize(static_cast<std::size_t>(id) + 1);
    }
    model.id_to_token_[id] = token;
    if (byte_level) {
      // Tokens outside the byte alphabet can never be produced from bytes; skip them.
      if (auto bytes = byte_level::decode(token)) {
        if (bytes->size() == 1) model.byte_ids_[static_cast<uint8_t>((*bytes)[0])] = id;
        model.byte_vocab_.insert(*bytes, id);
      }
    }
  }
  if (byte_level) {
    for (int byte = 0; byte < 256; ++byte) {
      RS_CHECK(model.byte_ids_[byte] >= 0, "unsupported tokenizer.json feature: byte-level vocab lacks byte 0x{:02X}",
               byte);
    }
  }

  const nlohmann::json& merges = config.at("merges");
  model.merges_.reserve(merges.size());
  const std::size_t prefix_bytes = model.continuing_subword_prefix_.size();
  for (std::size_t rank = 0; rank < merges.size(); ++rank) {
    const auto [left, right] = parse_merge(merges[rank], rank);
    const auto left_id = model.token_to_id(left);
    const auto right_id = model.token_to_id(right);
    RS_CHECK(left_id && right_id, "BPE merge {} '{} {}' names a token not in the vocab", rank, left, right);
    RS_CHECK(right.size() >= prefix_bytes, "BPE merge {} right side shorter than the prefix", rank);
    const std::string merged = left + right.substr(prefix_bytes);
    const auto merged_id = model.token_to_id(merged);
    RS_CHECK(merged_id.has_value(), "BPE merge {} result '{}' is not in the vocab", rank, merged);
    model.merges_.insert(*left_id, *right_id, {static_cast<int32_t>(rank), *merged_id});
  }
  return model;
}

std::optional<int32_t> BpeModel::token_to_id(std::string_view token) const { return vocab_.find(token); }

std::string_view BpeModel::id_to_token(int32_t id) const {
  if (id < 0 || id >= id_limit()) return {};
  return id_to_token_[id];
}

int32_t BpeModel::unk_id() const {
  const auto id = token_to_id(*unk_token_);
  RS_CHECK(id.has_value(), "BPE unk_token '{}' is not in the vocab", *unk_token_);
  return *id;
}

void BpeModel::initial_symbols_bytes(std::string_view piece, std::vector<int32_t>& symbols) const {
  for (const char c : piece) symbols.push_back(byte_ids_[static_cast<uint8_t>(c)]);
}

void BpeModel::initial_symbols_chars(std::string_view piece, std::vector<int32_t>& symbols) const {
  // HF merge_word: each character is a symbol; unknown ones become <0xXX> bytes (byte_fallback)
  // or the unk token (consecutive ones fused with fuse_unk), or are dropped.
  std::optional<int32_t> pending_unk;
  std::string key;
  std::size_t pos = 0;
  while (pos < piece.size()) {
    const std::size_t length = utf8::sequence_length(piece, pos);
    RS_CHECK(length > 0, "BPE: invalid UTF-8 at byte {}", pos);
    const std::string_view character = piece.substr(pos, length);
    key.clear();
    if (pos > 0) key += continuing_subword_prefix_;
    key += character;
    if (pos + length == piece.size()) key += end_of_word_suffix_;
    pos += length;
    if (const auto id = token_to_id(key)) {
      if (pending_unk) symbols.push_back(*std::exchange(pending_unk, std::nullopt));
      symbols.push_back(*id);
      continue;
    }
    if (byte_fallback_) {
      std::vector<int32_t> bytes;
      for (const char byte : key) {
        const auto id = token_to_id(fmt::format("<0x{:02X}>", static_cast<uint8_t>(byte)));
        if (!id) break;
        bytes.push_back(*id);
      }
      if (bytes.size() == key.size()) {
        // As in HF, a pending unk is not flushed before byte tokens.
        symbols.insert(symbols.end(), bytes.begin(), bytes.end());
        continue;
      }
    }
    if (unk_token_) {
      if (pending_unk && !fuse_unk_) symbols.push_back(*pending_unk);
      pending_unk = unk_id();
    }
  }
  if (pending_unk) symbols.push_back(*pending_unk);
}

void BpeModel::tokenize(std::string_view piece, std::vector<int32_t>& out) const {
  if (piece.empty()) return;
  if (ignore_merges_) {
    if (const auto id = (byte_level_ ? byte_vocab_ : vocab_).find(piece)) {
      out.push_back(*id);
      return;
    }
  }
  if (cache_->lookup(piece, out)) return;
  std::vector<int32_t> symbols;
  symbols.reserve(piece.size());
  if (byte_level_)
    initial_symbols_bytes(piece, symbols);
  else
    initial_symbols_chars(piece, symbols);
  const std::size_t first = out.size();
  merge_word(symbols, merges_, out);
  cache_->insert(piece, std::span<const int32_t>(out).subspan(first));
}

}  // namespace rs::tokenizer
