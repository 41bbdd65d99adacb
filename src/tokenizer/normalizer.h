// Normalizer: the tokenizer.json "normalizer" (NFC/NFD/NFKC/NFKD, Lowercase, Replace, Prepend,
// Strip and Sequences of them), applied to the text between added tokens.
#pragma once

#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "tokenizer/regex.h"
#include "tokenizer/unicode.h"

namespace rs::tokenizer {

class Normalizer {
 public:
  // `config` is the "normalizer" value (null = none). Throws rs::Error naming any normalizer type
  // we do not implement (BertNormalizer, Precompiled, ...).
  static Normalizer from_json(const nlohmann::json& config);

  bool is_identity() const { return steps_.empty(); }

  // Applies every step in order. `text` is valid UTF-8. Thread-safe.
  std::string normalize(std::string_view text) const;

 private:
  struct Unicode {
    unicode::NormalForm form;
  };
  struct Lowercase {};
  struct Replace {
    Pattern pattern;
    std::string content;
  };
  struct Prepend {
    std::string prefix;  // added in front of non-empty text
  };
  struct Strip {
    bool left;  // strip Unicode whitespace on that side
    bool right;
  };
  using Step = std::variant<Unicode, Lowercase, Replace, Prepend, Strip>;

  static void append_steps(const nlohmann::json& config, std::vector<Step>& steps);

  std::vector<Step> steps_;
};

}  // namespace rs::tokenizer
