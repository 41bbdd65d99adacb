// Streaming decode: re-decode the held-back window until the decoder reports it final.
#include "tokenizer/detokenizer.h"

#include "tokenizer/pipeline.h"
#include "tokenizer/tokenizer.h"

namespace rs::tokenizer {

Detokenizer::Detokenizer(const Tokenizer& tokenizer, bool skip_special_tokens)
    : pipeline_(*tokenizer.pipeline_), skip_special_tokens_(skip_special_tokens) {}

std::string Detokenizer::push(int32_t id) {
  const auto token = pipeline_.decode_string(id, skip_special_tokens_);
  if (!token) return {};
  window_.emplace_back(*token);
  DecodeContext context{.at_start = at_start_, .at_end = false};
  std::string text = pipeline_.decoder.decode(window_, context);
  if (context.open) return {};
  // The window is final and decoding can restart after it (Decoder's concatenation invariant).
  window_.clear();
  at_start_ = false;
  return text;
}

std::string Detokenizer::flush() {
  if (window_.empty()) return {};
  DecodeContext context{.at_start = at_start_, .at_end = true};
  std::string text = pipeline_.decoder.decode(std::move(window_), context);
  window_.clear();
  at_start_ = false;
  return text;
}

}  // namespace rs::tokenizer
