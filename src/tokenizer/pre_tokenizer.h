// PreTokenizer: the tokenizer.json "pre_tokenizer" (Split, ByteLevel, Metaspace, Digits and
// Sequences of them) that cuts normalized text into the pieces the BPE model encodes one by one.
#pragma once

#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "tokenizer/regex.h"

namespace rs::tokenizer {

struct Piece {
  std::string_view text;  // raw UTF-8 bytes (ByteLevel does not map them: the BPE model does)
  bool at_start;          // starts at offset 0 of the original input (Metaspace "first")
};

// Owns the text of pieces that a step rewrote (prefix spaces, metaspace replacement).
using PieceArena = std::deque<std::string>;

// HF SplitDelimiterBehavior: what becomes of the matches of a Split pattern.
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

class PreTokenizer {
 public:
  // `config` is the "pre_tokenizer" value (null = the whole text is one piece). Throws rs::Error
  // naming unsupported types, and when ByteLevel is not the last step.
  static PreTokenizer from_json(const nlohmann::json& config);

  // True when a ByteLevel step is present: pieces must then be encoded by a byte-level model.
  bool byte_level() const { return byte_level_; }

  // Appends the non-empty pieces of `text` (valid UTF-8). `at_start`: text begins the input.
  // Thread-safe.
  void split(std::string_view text, bool at_start, std::vector<Piece>& pieces, PieceArena& arena) const;

 private:
  enum class PrependScheme { kAlways, kFirst, kNever };

  struct Split {
    Pattern pattern;
    SplitBehavior behavior;
    bool invert;
  };
  struct ByteLevel {
    bool add_prefix_space;
    bool use_regex;  // split with the GPT-2 regex first
  };
  struct Metaspace {
    std::string replacement;  // one character, usually U+2581
    PrependScheme prepend_scheme;
    bool split;
  };
  struct Digits {
    bool individual_digits;
  };
  using Step = std::variant<Split, ByteLevel, Metaspace, Digits>;

  void append_steps(const nlohmann::json& config);
  void apply(const Step& step, const Piece& piece, std::vector<Piece>& out, PieceArena& arena,
             std::vector<Match>& scratch) const;

  std::vector<Step> steps_;
  std::optional<Regex> gpt2_regex_;  // set when a ByteLevel step splits with its regex
  bool byte_level_ = false;
};

}  // namespace rs::tokenizer
