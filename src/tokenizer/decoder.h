// Decoder: the tokenizer.json "decoder" (ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace
// and Sequences of them) turning token strings back into text, whole or one stream window at a time.
#pragma once

#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "tokenizer/regex.h"

namespace rs::tokenizer {

// How a list of tokens sits in the whole sequence. decode() of a full sequence uses the defaults.
// A streaming window that may be followed by more tokens sets at_end = false; the decoder then
// sets `open` when the window's text could still change with what follows (a truncated UTF-8
// character, an unfinished <0xXX> run, trailing characters a Strip may remove, ...).
struct DecodeContext {
  bool at_start = true;  // the first token is the first (kept) token of the sequence
  bool at_end = true;    // no token follows
  bool open = false;     // output: with at_end = false, the text is not final yet
};

class Decoder {
 public:
  // `config` is the "decoder" value (null = tokens joined with spaces). Throws rs::Error naming
  // unsupported types (WordPiece, CTC, BPEDecoder, ...).
  static Decoder from_json(const nlohmann::json& config);

  // Decodes token strings (vocab strings and added-token contents). Invariant the streaming
  // detokenizer relies on: if decode(a, {s, at_end=false}) leaves `open` false, then
  // decode(a + b, {s, e}) == decode(a, {s, false}) + decode(b, {false, e}) for every b.
  std::string decode(std::vector<std::string> tokens, DecodeContext& context) const;

 private:
  struct ByteLevel {};
  struct Replace {
    Pattern pattern;
    std::string content;
  };
  struct ByteFallback {};
  struct Fuse {};
  struct Strip {
    char32_t content;
    std::size_t start;  // strip up to this many leading `content` characters
    std::size_t stop;   // ... and trailing ones
  };
  struct Metaspace {
    char32_t replacement;
    bool strip_first;  // prepend_scheme != never: the first token loses its replacements
  };
  using Step = std::variant<ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace>;

  void append_steps(const nlohmann::json& config);

  std::vector<Step> steps_;
  bool join_with_spaces_ = false;  // no decoder at all
};

}  // namespace rs::tokenizer
