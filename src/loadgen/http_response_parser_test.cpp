#include "loadgen/http_response_parser.h"

#include <gtest/gtest.h>

namespace rs::loadgen {
namespace {

// Feeds `response` in pieces of `piece` bytes; returns the decoded body ("<error>" when the parser refused it).
std::string parse_in_pieces(HttpResponseParser& parser, std::string_view response, size_t piece) {
  std::string body;
  for (size_t at = 0; at < response.size(); at += piece)
    if (!parser.feed(response.substr(at, piece), [&](std::string_view bytes) { body.append(bytes); })) return "<error>";
  return body;
}

const std::string kChunked =
    "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    "e\r\ndata: {\"a\":1}\n\r\n"
    "1D;ext=1\r\ndata: {\"b\":22}\n\ndata: [DONE]\n\r\n"
    "1\r\n\n\r\n"
    "0\r\nX-Trailer: yes\r\n\r\n";

TEST(HttpResponseParser, ChunkedBodySplitAtEveryByteBoundary) {
  for (size_t piece = 1; piece <= kChunked.size(); ++piece) {
    HttpResponseParser parser;
    EXPECT_EQ(parse_in_pieces(parser, kChunked, piece), "data: {\"a\":1}\ndata: {\"b\":22}\n\ndata: [DONE]\n\n")
        << "pieces of " << piece;
    EXPECT_TRUE(parser.done()) << piece;
    EXPECT_EQ(parser.status(), 200);
    EXPECT_TRUE(parser.keep_alive());
  }
}

TEST(HttpResponseParser, ContentLengthBodyAndConnectionClose) {
  const std::string response =
      "HTTP/1.1 503 Service Unavailable\r\ncontent-length: 5\r\nConnection: close\r\n\r\nbusy!";
  for (size_t piece : {1, 3, 1000}) {
    HttpResponseParser parser;
    EXPECT_EQ(parse_in_pieces(parser, response, piece), "busy!");
    EXPECT_TRUE(parser.done());
    EXPECT_EQ(parser.status(), 503);
    EXPECT_FALSE(parser.keep_alive());
  }
}

TEST(HttpResponseParser, BodyUntilCloseEndsOnlyAtClose) {
  HttpResponseParser parser;
  EXPECT_EQ(parse_in_pieces(parser, "HTTP/1.0 200 OK\r\n\r\nabc", 2), "abc");
  EXPECT_FALSE(parser.done());
  EXPECT_TRUE(parser.finish_on_close());
  EXPECT_FALSE(parser.keep_alive());
}

TEST(HttpResponseParser, TruncatedChunkedBodyIsIncompleteAtClose) {
  HttpResponseParser parser;
  EXPECT_EQ(parse_in_pieces(parser, kChunked.substr(0, kChunked.size() - 10), 7).substr(0, 6), "data: ");
  EXPECT_FALSE(parser.done());
  EXPECT_FALSE(parser.finish_on_close());
}

TEST(HttpResponseParser, InterimResponseIsSkipped) {
  HttpResponseParser parser;
  EXPECT_EQ(parse_in_pieces(parser, "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", 4),
            "ok");
  EXPECT_EQ(parser.status(), 200);
  EXPECT_TRUE(parser.done());
}

TEST(HttpResponseParser, MalformedResponsesAreRefused) {
  for (const std::string bad :
       {"HTTQ/1.1 200 OK\r\n\r\n", "HTTP/1.1 2x0 OK\r\n\r\n", "HTTP/1.1 200 OK\r\nnocolon\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: -4\r\n\r\n", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabcd\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nab"}) {
    HttpResponseParser parser;
    EXPECT_EQ(parse_in_pieces(parser, bad, 1000), "<error>") << bad;
    EXPECT_TRUE(parser.failed()) << bad;
    EXPECT_FALSE(parser.error().empty());
  }
}

TEST(HttpResponseParser, ResetReadsTheNextResponseOnTheConnection) {
  HttpResponseParser parser;
  EXPECT_EQ(parse_in_pieces(parser, "HTTP/1.1 204 No Content\r\n\r\n", 5), "");
  EXPECT_TRUE(parser.done());
  parser.reset();
  EXPECT_EQ(parse_in_pieces(parser, kChunked, 64).size(), 44u);
  EXPECT_TRUE(parser.done());
}

}  // namespace
}  // namespace rs::loadgen
