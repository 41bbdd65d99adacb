// Detokenizer: incremental decoding of a generated token stream for SSE, one chunk per token.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace rs::tokenizer {

class Tokenizer;
struct Pipeline;

// Contract: the concatenation of every push() result and the final flush() equals
// tokenizer.decode(all ids, skip_special_tokens) byte for byte, and no chunk ends inside a UTF-8
// character. Text is held back only while it may still change: a character split across byte
// tokens, an unfinished <0xXX> byte-fallback run (HF decodes a run as a whole: an invalid run
// becomes one U+FFFD per byte), trailing characters a Strip decoder may remove. SentencePiece's
// leading-space removal applies to the first kept token only, exactly as in decode().
// clean_up_tokenization_spaces is never applied (decode() does not either).
// Cost per token is the size of the held-back window, normally one or two tokens.
// One instance per sequence, used by one thread; the Tokenizer must outlive it.
class Detokenizer {
 public:
  Detokenizer(const Tokenizer& tokenizer, bool skip_special_tokens);

  // Adds the next generated id; returns the text that became final (often empty for a partial
  // character). Unknown ids and, with skip_special_tokens, special tokens add nothing.
  std::string push(int32_t id);

  // Ends the sequence: returns whatever was held back (e.g. U+FFFD for a truncated character).
  std::string flush();

 private:
  const Pipeline& pipeline_;
  bool skip_special_tokens_;
  std::vector<std::string> window_;  // token strings not yet emitted
  bool at_start_ = true;             // nothing has been emitted from a kept token yet
};

}  // namespace rs::tokenizer
