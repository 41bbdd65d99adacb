#include "loadgen/sse_parser.h"

#include <gtest/gtest.h>

#include <vector>

namespace rs::loadgen {
namespace {

std::vector<std::string> events_in_pieces(std::string_view stream, size_t piece) {
  SseParser parser;
  std::vector<std::string> events;
  for (size_t at = 0; at < stream.size(); at += piece)
    parser.feed(stream.substr(at, piece), [&](std::string_view data) { events.emplace_back(data); });
  return events;
}

TEST(SseParser, EventsSplitAnywhereWithEveryLineEnding) {
  const std::string stream =
      ": keep-alive comment\n\n"
      "data: {\"text\":\"a\"}\n\n"
      "event: message\r\ndata:{\"text\":\"b\"}\r\n\r\n"
      "data: line one\rdata:  line two\r\r"
      "id: 7\n\n"  // no data field: no event
      "data: [DONE]\n\n";
  const std::vector<std::string> expected = {"{\"text\":\"a\"}", "{\"text\":\"b\"}", "line one\n line two", "[DONE]"};
  for (size_t piece = 1; piece <= stream.size(); ++piece) EXPECT_EQ(events_in_pieces(stream, piece), expected) << piece;
}

TEST(SseParser, IncompleteEventIsHeldBack) {
  SseParser parser;
  std::vector<std::string> events;
  parser.feed("data: {\"x\":1}\n", [&](std::string_view data) { events.emplace_back(data); });
  EXPECT_TRUE(events.empty());
  EXPECT_GT(parser.pending_bytes(), 0u);
  parser.feed("\n", [&](std::string_view data) { events.emplace_back(data); });
  EXPECT_EQ(events, std::vector<std::string>{"{\"x\":1}"});
  EXPECT_EQ(parser.pending_bytes(), 0u);
}

TEST(SseParser, EmptyDataFieldStillDispatches) {
  EXPECT_EQ(events_in_pieces("data\n\ndata:\n\n", 3), (std::vector<std::string>{"", ""}));
}

}  // namespace
}  // namespace rs::loadgen
