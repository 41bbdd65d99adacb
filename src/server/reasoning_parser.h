// ReasoningParser: splits a chat answer into the model's reasoning and its reply, for models that wrap their thinking
// in tags (Qwen3: <think> ... </think>), as SGLang's and vLLM's "qwen3" reasoning parsers expose it:
// message.reasoning_content and message.content. Text arrives in arbitrary pieces (streaming); an incomplete tag at
// the end of a piece is held back until the next piece decides it, so every piece's output is final.
#pragma once

#include <string>
#include <string_view>

namespace rs::server {

class ReasoningParser {
 public:
  struct Split {
    std::string reasoning;
    std::string content;
  };

  // starts_in_reasoning: the prompt already opened the tag (templates that end the generation prompt with "<think>").
  ReasoningParser(std::string open_tag, std::string close_tag, bool starts_in_reasoning);

  Split feed(std::string_view text);
  // End of the answer: releases held-back text (an unfinished tag is plain text).
  Split finish();

 private:
  enum class State { kBeforeReasoning, kReasoning, kContent };
  void emit(std::string_view text, Split& out);

  std::string open_, close_;
  State state_;
  std::string pending_;      // a possible tag prefix not yet decided
  bool skip_space_ = false;  // whitespace right after the closing tag (or before the reply) is not content
};

}  // namespace rs::server
