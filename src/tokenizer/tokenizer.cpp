// Tokenizer encode/decode over the loaded Pipeline (HF tokenizers TokenizerImpl::encode/decode).
#include "tokenizer/tokenizer.h"

#include "base/error.h"
#include "base/utf8.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/pipeline.h"

namespace rs::tokenizer {

std::optional<std::string_view> Pipeline::decode_string(int32_t id, bool skip_special_tokens) const {
  if (const AddedToken* token = added.find(id)) {
    if (skip_special_tokens && token->special) return std::nullopt;
    return std::string_view(token->content);
  }
  const std::string_view vocab_string = model.id_to_token(id);
  if (vocab_string.empty()) return std::nullopt;
  return vocab_string;
}

Tokenizer::Tokenizer(std::unique_ptr<const Pipeline> pipeline) : pipeline_(std::move(pipeline)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  const Pipeline& pipeline = *pipeline_;
  const std::size_t invalid_at = utf8::first_invalid(text);
  RS_CHECK(invalid_at == std::string_view::npos, "encode: input is not valid UTF-8 (byte {})", invalid_at);
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  std::vector<Segment> raw_segments;
  std::vector<Segment> normalized_segments;
  std::vector<Piece> pieces;
  PieceArena arena;
  // 1. Added tokens in the raw text; 2. normalize each gap and find normalized added tokens;
  // 3. pre-tokenize and BPE-encode what is left. A piece never spans an added token.
  pipeline.added.split(text, /*normalized_set=*/false, raw_segments);
  for (const Segment& raw : raw_segments) {
    if (raw.id >= 0) {
      ids.push_back(raw.id);
      continue;
    }
    std::string_view section = text.substr(raw.begin, raw.end - raw.begin);
    std::string normalized;
    if (!pipeline.normalizer.is_identity()) {
      normalized = pipeline.normalizer.normalize(section);
      section = normalized;
    }
    normalized_segments.clear();
    if (pipeline.added.has_normalized_tokens()) {
      pipeline.added.split(section, /*normalized_set=*/true, normalized_segments);
    } else if (!section.empty()) {
      normalized_segments.push_back({0, section.size(), -1});
    }
    for (const Segment& segment : normalized_segments) {
      if (segment.id >= 0) {
        ids.push_back(segment.id);
        continue;
      }
      pieces.clear();
      arena.clear();
      pipeline.pre_tokenizer.split(section.substr(segment.begin, segment.end - segment.begin),
                                   raw.begin == 0 && segment.begin == 0, pieces, arena);
      for (const Piece& piece : pieces) pipeline.model.tokenize(piece.text, ids);
    }
  }
  pipeline.post_processor.process(ids, add_special_tokens);
  return ids;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (const int32_t id : ids) {
    if (const auto token = pipeline_->decode_string(id, skip_special_tokens)) {
      tokens.emplace_back(*token);
    }
  }
  DecodeContext context;
  return pipeline_->decoder.decode(std::move(tokens), context);
}

int32_t Tokenizer::vocab_size() const { return pipeline_->vocab_size; }

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  if (const auto id = pipeline_->added.token_to_id(token)) return id;
  return pipeline_->model.token_to_id(token);
}

std::string_view Tokenizer::id_to_token(int32_t id) const {
  return pipeline_->decode_string(id, /*skip_special_tokens=*/false).value_or(std::string_view());
}

namespace {

// SentencePiece pieces: U+2581 stands for a space, <0xXX> for one byte.
std::string sentencepiece_bytes(std::string_view piece) {
  if (piece.size() == 6 && piece.starts_with("<0x") && piece.back() == '>') {
    const std::string hex(piece.substr(3, 2));
    return std::string(1, static_cast<char>(std::stoi(hex, nullptr, 16)));
  }
  std::string out;
  static constexpr std::string_view kSpace = "\xE2\x96\x81";
  for (size_t i = 0; i < piece.size();) {
    if (piece.substr(i, 3) == kSpace) {
      out += ' ';
      i += 3;
    } else {
      out += piece[i++];
    }
  }
  return out;
}

}  // namespace

std::string Tokenizer::token_bytes(int32_t id) const {
  const std::string_view piece = id_to_token(id);
  if (is_special(id)) return std::string(piece);
  // "Ġ" (a space in the GPT-2 alphabet) is a token of every byte-level vocabulary.
  const bool byte_level = token_to_id("\xC4\xA0").has_value();
  // Added (non-special) tokens such as Qwen's <tool_call> are their own text, as is anything outside the alphabet.
  if (byte_level && token_to_id(piece) == id)
    if (std::optional<std::string> raw = byte_level::decode(piece)) return *std::move(raw);
  return byte_level ? std::string(piece) : sentencepiece_bytes(piece);
}

bool Tokenizer::is_special(int32_t id) const {
  const AddedToken* token = pipeline_->added.find(id);
  return token != nullptr && token->special;
}

const std::optional<std::string>& Tokenizer::bos_token() const { return pipeline_->bos_token; }
const std::optional<std::string>& Tokenizer::eos_token() const { return pipeline_->eos_token; }
const nlohmann::json& Tokenizer::tokenizer_config() const { return pipeline_->config; }

}  // namespace rs::tokenizer
