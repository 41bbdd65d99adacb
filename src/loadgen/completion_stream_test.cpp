#include "loadgen/completion_stream.h"

#include <gtest/gtest.h>

namespace rs::loadgen {
namespace {

std::string chunk(const std::string& text) {
  return R"({"id":"cmpl-1","object":"text_completion","choices":[{"index":0,"text":")" + text +
         R"(","finish_reason":null}],"usage":null})";
}
const std::string kUsage =
    R"({"id":"cmpl-1","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15,)"
    R"("prompt_tokens_details":{"cached_tokens":8},"speculative":{"verify_steps":5,"accepted_tokens":9}}})";

TEST(CompletionStream, TimesChunksAndReadsUsage) {
  RequestResult r;
  r.start_s = 1.0;
  CompletionStream stream;
  stream.on_event(chunk("a"), 1.25, r);
  stream.on_event(chunk(""), 1.30, r);  // no text: not a token arrival
  stream.on_event(chunk("b"), 1.35, r);
  stream.on_event(chunk("c"), 1.50, r);
  stream.on_event(kUsage, 1.51, r);
  stream.on_event("[DONE]", 1.52, r);
  stream.on_end(1.53, r);
  EXPECT_TRUE(r.ok()) << r.error_detail;
  EXPECT_DOUBLE_EQ(r.ttft_s, 0.25);
  ASSERT_EQ(r.itl_s.size(), 2u);
  EXPECT_NEAR(r.itl_s[0], 0.10, 1e-12);
  EXPECT_NEAR(r.itl_s[1], 0.15, 1e-12);
  EXPECT_NEAR(r.latency_s, 0.52, 1e-12);
  EXPECT_EQ(r.prompt_tokens, 12);
  EXPECT_EQ(r.completion_tokens, 3);
  EXPECT_EQ(r.cached_tokens, 8);
  EXPECT_EQ(r.spec_verify_steps, 5);
  EXPECT_EQ(r.spec_accepted_tokens, 9);
}

// A model without a tokenizer (dummy weights) streams token ids with empty text: each chunk is still a token.
TEST(CompletionStream, TokenIdsWithoutTextAreTokens) {
  const auto ids_chunk = [](int id) {
    return R"({"choices":[{"index":0,"text":"","token_ids":[)" + std::to_string(id) + R"(],"finish_reason":null}]})";
  };
  RequestResult r;
  r.start_s = 2.0;
  CompletionStream stream;
  stream.on_event(ids_chunk(7), 2.5, r);
  stream.on_event(R"({"choices":[{"index":0,"text":"","token_ids":[],"finish_reason":null}]})", 2.6, r);
  stream.on_event(ids_chunk(8), 2.75, r);
  EXPECT_DOUBLE_EQ(r.ttft_s, 0.5);
  ASSERT_EQ(r.itl_s.size(), 1u);
  EXPECT_NEAR(r.itl_s[0], 0.25, 1e-12);
}

TEST(CompletionStream, MissingDoneOrUsageIsMalformed) {
  RequestResult no_done;
  CompletionStream a;
  a.on_event(chunk("a"), 0.1, no_done);
  a.on_event(kUsage, 0.2, no_done);
  a.on_end(0.3, no_done);
  EXPECT_EQ(no_done.error, ErrorKind::kMalformed);

  RequestResult no_usage;
  CompletionStream b;
  b.on_event(chunk("a"), 0.1, no_usage);
  b.on_event("[DONE]", 0.2, no_usage);
  b.on_end(0.3, no_usage);
  EXPECT_EQ(no_usage.error, ErrorKind::kMalformed);
}

TEST(CompletionStream, BadJsonAndErrorObjects) {
  RequestResult bad;
  CompletionStream a;
  a.on_event("{not json", 0.1, bad);
  EXPECT_EQ(bad.error, ErrorKind::kMalformed);

  RequestResult failed;
  CompletionStream b;
  b.on_event(chunk("a"), 0.1, failed);
  b.on_event(R"({"error":{"message":"KV cache exhausted","type":"server_error"}})", 0.2, failed);
  b.on_event("[DONE]", 0.3, failed);
  b.on_end(0.3, failed);
  EXPECT_EQ(failed.error, ErrorKind::kStreamError);
  EXPECT_EQ(failed.error_detail, "KV cache exhausted");
}

}  // namespace
}  // namespace rs::loadgen
