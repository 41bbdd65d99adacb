// Pre-tokenizer steps, following HF tokenizers' pre_tokenizers/ and NormalizedString::split.
#include "tokenizer/pre_tokenizer.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/utf8.h"
#include "tokenizer/unicode.h"

namespace rs::tokenizer {
namespace {

// GPT-2's pre-tokenizer regex (ByteLevel with use_regex = true).
constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

struct Span {
  std::size_t begin;
  std::size_t end;
  bool is_match;
};

// Covers [0, size) with the matches and the gaps between them (HF Pattern::find_matches).
void to_spans(std::size_t size, const std::vector<Match>& matches, bool invert, std::vector<Span>& spans) {
  spans.clear();
  if (size == 0) {
    spans.push_back({0, 0, invert});
    return;
  }
  std::size_t previous = 0;
  for (const Match& match : matches) {
    if (match.begin != previous) spans.push_back({previous, match.begin, invert});
    spans.push_back({match.begin, match.end, !invert});
    previous = match.end;
  }
  if (previous != size) spans.push_back({previous, size, invert});
}

// Applies HF's SplitDelimiterBehavior to spans covering a piece. Afterwards is_match means
// "remove this span" (only kRemoved removes anything).
void merge_spans(SplitBehavior behavior, std::vector<Span>& spans) {
  if (behavior == SplitBehavior::kRemoved) return;
  std::vector<Span> merged;
  merged.reserve(spans.size());
  bool previous_match = false;
  if (behavior == SplitBehavior::kMergedWithNext) {
    for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
      if (it->is_match && !previous_match && !merged.empty())
        merged.back().begin = it->begin;
      else
        merged.push_back({it->begin, it->end, false});
      previous_match = it->is_match;
    }
    std::reverse(merged.begin(), merged.end());
  } else {
    for (const Span& span : spans) {
      const bool merge =
          !merged.empty() && ((behavior == SplitBehavior::kContiguous && span.is_match == previous_match) ||
                              (behavior == SplitBehavior::kMergedWithPrevious && span.is_match && !previous_match));
      if (merge)
        merged.back().end = span.end;
      else
        merged.push_back({span.begin, span.end, false});
      previous_match = span.is_match;
    }
  }
  spans.swap(merged);
}

// Every occurrence of a character satisfying `predicate` is one match.
template <typename Predicate>
void match_chars(std::string_view text, Predicate predicate, std::vector<Match>& matches) {
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t length = utf8::sequence_length(text, pos);
    RS_CHECK(length > 0, "pre-tokenizer: invalid UTF-8 at byte {}", pos);
    if (predicate(text, pos, length)) matches.push_back({pos, pos + length});
    pos += length;
  }
}

}  // namespace

void PreTokenizer::append_steps(const nlohmann::json& config) {
  RS_CHECK(!byte_level_, "unsupported tokenizer.json feature: a pre-tokenizer after ByteLevel");
  const std::string type = config.at("type").get<std::string>();
  if (type == "Sequence") {
    for (const auto& child : config.at("pretokenizers")) append_steps(child);
  } else if (type == "Split") {
    static const std::pair<std::string_view, SplitBehavior> kBehaviors[] = {
        {"Removed", SplitBehavior::kRemoved},
        {"Isolated", SplitBehavior::kIsolated},
        {"MergedWithPrevious", SplitBehavior::kMergedWithPrevious},
        {"MergedWithNext", SplitBehavior::kMergedWithNext},
        {"Contiguous", SplitBehavior::kContiguous}};
    const std::string behavior = config.at("behavior").get<std::string>();
    const auto* found = std::find_if(std::begin(kBehaviors), std::end(kBehaviors),
                                     [&](const auto& entry) { return entry.first == behavior; });
    RS_CHECK(found != std::end(kBehaviors), "unsupported Split behavior '{}'", behavior);
    steps_.emplace_back(Split{Pattern::from_json(config.at("pattern")), found->second, config.value("invert", false)});
  } else if (type == "ByteLevel") {
    const bool use_regex = config.value("use_regex", true);
    const bool add_prefix_space = config.value("add_prefix_space", true);
    if (use_regex) gpt2_regex_.emplace(kGpt2Pattern);
    // Byte mapping happens in the model, so without prefix or regex this step changes nothing.
    if (use_regex || add_prefix_space) steps_.emplace_back(ByteLevel{add_prefix_space, use_regex});
    byte_level_ = true;
  } else if (type == "Metaspace") {
    // Older files spell prepend_scheme as add_prefix_space (false = never).
    PrependScheme scheme = PrependScheme::kAlways;
    const std::string name = config.value("prepend_scheme", std::string("always"));
    if (name == "first")
      scheme = PrependScheme::kFirst;
    else if (name == "never")
      scheme = PrependScheme::kNever;
    else
      RS_CHECK(name == "always", "unsupported Metaspace prepend_scheme '{}'", name);
    if (config.contains("add_prefix_space") && !config.at("add_prefix_space").get<bool>()) {
      scheme = PrependScheme::kNever;
    }
    const std::string replacement = config.at("replacement").get<std::string>();
    RS_CHECK(!replacement.empty() && utf8::sequence_length(replacement, 0) == replacement.size(),
             "Metaspace replacement must be one character, got '{}'", replacement);
    steps_.emplace_back(Metaspace{replacement, scheme, config.value("split", true)});
  } else if (type == "Digits") {
    steps_.emplace_back(Digits{config.value("individual_digits", false)});
  } else {
    RS_FAIL("unsupported tokenizer.json feature: pre_tokenizer type '{}'", type);
  }
}

PreTokenizer PreTokenizer::from_json(const nlohmann::json& config) {
  PreTokenizer pre_tokenizer;
  if (!config.is_null()) pre_tokenizer.append_steps(config);
  return pre_tokenizer;
}

void PreTokenizer::apply(const Step& step, const Piece& piece, std::vector<Piece>& out, PieceArena& arena,
                         std::vector<Match>& matches) const {
  std::string_view text = piece.text;
  SplitBehavior behavior = SplitBehavior::kIsolated;
  bool invert = false;
  matches.clear();
  if (const auto* split = std::get_if<Split>(&step)) {
    split->pattern.find_all(text, matches);
    behavior = split->behavior;
    invert = split->invert;
  } else if (const auto* byte_level = std::get_if<ByteLevel>(&step)) {
    if (byte_level->add_prefix_space && (text.empty() || text.front() != ' ')) {
      std::string& prefixed = arena.emplace_back(1, ' ');
      prefixed.append(text);
      text = prefixed;
    }
    if (!byte_level->use_regex) {
      out.push_back({text, piece.at_start});
      return;
    }
    gpt2_regex_->find_all(text, matches);
  } else if (const auto* metaspace = std::get_if<Metaspace>(&step)) {
    std::string replaced;
    for (const char c : text) {
      if (c == ' ')
        replaced += metaspace->replacement;
      else
        replaced.push_back(c);
    }
    const bool starts_with_replacement = replaced.starts_with(metaspace->replacement);
    if (!starts_with_replacement && (metaspace->prepend_scheme == PrependScheme::kAlways ||
                                     (metaspace->prepend_scheme == PrependScheme::kFirst && piece.at_start))) {
      replaced.insert(0, metaspace->replacement);
    }
    text = arena.emplace_back(std::move(replaced));
    if (!metaspace->split) {
      out.push_back({text, piece.at_start});
      return;
    }
    const std::string_view replacement = metaspace->replacement;
    match_chars(
        text,
        [&](std::string_view t, std::size_t pos, std::size_t length) { return t.substr(pos, length) == replacement; },
        matches);
    behavior = SplitBehavior::kMergedWithNext;
  } else if (const auto* digits = std::get_if<Digits>(&step)) {
    match_chars(
        text,
        [](std::string_view t, std::size_t pos, std::size_t length) {
          return unicode::is_numeric(utf8::decode(t, pos, length));
        },
        matches);
    behavior = digits->individual_digits ? SplitBehavior::kIsolated : SplitBehavior::kContiguous;
  }

  if (behavior == SplitBehavior::kIsolated && !invert) {  // the common case: matches and gaps as is
    std::size_t previous = 0;
    const auto emit = [&](std::size_t begin, std::size_t end) {
      if (begin < end) out.push_back({text.substr(begin, end - begin), piece.at_start && begin == 0});
    };
    for (const Match& match : matches) {
      emit(previous, match.begin);
      emit(match.begin, match.end);
      previous = match.end;
    }
    emit(previous, text.size());
    return;
  }
  std::vector<Span> spans;
  to_spans(text.size(), matches, invert, spans);
  merge_spans(behavior, spans);
  for (const Span& span : spans) {
    if (span.is_match || span.begin == span.end) continue;  // removed or empty
    out.push_back({text.substr(span.begin, span.end - span.begin), piece.at_start && span.begin == 0});
  }
}

void PreTokenizer::split(std::string_view text, bool at_start, std::vector<Piece>& pieces, PieceArena& arena) const {
  if (text.empty()) return;
  if (steps_.empty()) {
    pieces.push_back({text, at_start});
    return;
  }
  std::vector<Match> matches;
  if (steps_.size() == 1) {  // e.g. one Split: straight into the caller's vector
    apply(steps_[0], Piece{text, at_start}, pieces, arena, matches);
    return;
  }
  std::vector<Piece> current{{text, at_start}};
  std::vector<Piece> next;
  for (const Step& step : steps_) {
    next.clear();
    for (const Piece& piece : current) apply(step, piece, next, arena, matches);
    current.swap(next);
  }
  pieces.insert(pieces.end(), current.begin(), current.end());
}

}  // namespace rs::tokenizer
