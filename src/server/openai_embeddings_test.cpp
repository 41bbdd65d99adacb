#include "server/openai_embeddings.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "base/base64.h"

namespace rs::server {
namespace {

const RequestLimits kLimits;

EmbeddingRequest parse_ok(const std::string& body) {
  auto parsed = parse_embedding_request(body, kLimits);
  if (auto* error = std::get_if<ApiError>(&parsed)) ADD_FAILURE() << body << ": " << error->message;
  return std::get<EmbeddingRequest>(parsed);
}

ApiError parse_error(const std::string& body) {
  auto parsed = parse_embedding_request(body, kLimits);
  EXPECT_TRUE(std::holds_alternative<ApiError>(parsed)) << body;
  return std::holds_alternative<ApiError>(parsed) ? std::get<ApiError>(parsed) : ApiError{};
}

TEST(EmbeddingRequest, EveryInputShape) {
  EXPECT_EQ(parse_ok(R"({"input":"hello"})").texts, std::vector<std::string>{"hello"});
  EXPECT_EQ(parse_ok(R"({"input":["a","b"],"model":"m"})").texts, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(parse_ok(R"({"input":[1,2,3]})").token_inputs, (std::vector<std::vector<int32_t>>{{1, 2, 3}}));
  EXPECT_EQ(parse_ok(R"({"input":[[1],[2,3]]})").token_inputs, (std::vector<std::vector<int32_t>>{{1}, {2, 3}}));
  const EmbeddingRequest r = parse_ok(R"({"input":"x","encoding_format":"base64","dimensions":8,"user":"u"})");
  EXPECT_TRUE(r.base64);
  EXPECT_EQ(r.dimensions, 8);
  EXPECT_FALSE(parse_ok(R"({"input":"x","encoding_format":"float"})").base64);
}

TEST(EmbeddingRequest, RefusalsNameTheParameter) {
  EXPECT_EQ(parse_error(R"({"model":"m"})").param, "input");
  EXPECT_EQ(parse_error(R"({"input":[]})").param, "input");
  EXPECT_EQ(parse_error(R"({"input":[1,"a"]})").param, "input");
  EXPECT_EQ(parse_error(R"({"input":"x","encoding_format":"int8"})").param, "encoding_format");
  EXPECT_EQ(parse_error(R"({"input":"x","dimensions":0})").param, "dimensions");
  EXPECT_EQ(parse_error(R"({"input":"x","dimensions":"8"})").param, "dimensions");
  EXPECT_EQ(parse_error("not json").code, "invalid_json");
}

TEST(EmbeddingDimensions, OnlyMatryoshkaModelsCut) {
  const EmbeddingModel plain{64, true, false, {}};
  EXPECT_FALSE(check_dimensions(plain, std::nullopt));
  EXPECT_FALSE(check_dimensions(plain, 64));
  EXPECT_EQ(check_dimensions(plain, 32)->code, "unsupported_parameter");
  const EmbeddingModel any{64, true, true, {}};
  EXPECT_FALSE(check_dimensions(any, 32));
  EXPECT_TRUE(check_dimensions(any, 65));
  const EmbeddingModel listed{64, true, true, {16, 32}};
  EXPECT_FALSE(check_dimensions(listed, 16));
  EXPECT_TRUE(check_dimensions(listed, 24));
  // The first values, normalised again.
  const std::vector<float> cut = truncate_embedding({3.0f, 4.0f, 12.0f}, 2, true);
  ASSERT_EQ(cut.size(), 2u);
  EXPECT_FLOAT_EQ(cut[0], 0.6f);
  EXPECT_FLOAT_EQ(cut[1], 0.8f);
  EXPECT_EQ(truncate_embedding({3.0f, 4.0f, 12.0f}, 2, false), (std::vector<float>{3.0f, 4.0f}));
}

TEST(EmbeddingList, FloatAndBase64) {
  const std::vector<std::vector<float>> embeddings = {{1.0f, -0.5f}, {0.25f, 2.0f}};
  const nlohmann::json floats = embedding_list("m", embeddings, false, 7);
  EXPECT_EQ(floats["object"], "list");
  EXPECT_EQ(floats["model"], "m");
  EXPECT_EQ(floats["usage"]["prompt_tokens"], 7);
  EXPECT_EQ(floats["usage"]["total_tokens"], 7);
  ASSERT_EQ(floats["data"].size(), 2u);
  EXPECT_EQ(floats["data"][1]["index"], 1);
  EXPECT_EQ(floats["data"][1]["object"], "embedding");
  EXPECT_EQ(floats["data"][1]["embedding"], (std::vector<float>{0.25f, 2.0f}));
  // base64 of the little-endian f32 bytes: 1.0f = 00 00 80 3f, -0.5f = 00 00 00 bf.
  const nlohmann::json packed = embedding_list("m", embeddings, true, 7);
  EXPECT_EQ(packed["data"][0]["embedding"], "AACAPwAAAL8=");
}

TEST(Base64, Rfc4648Vectors) {
  const auto encode = [](const std::string& s) {
    return base64_encode(std::span(reinterpret_cast<const uint8_t*>(s.data()), s.size()));
  };
  EXPECT_EQ(encode(""), "");
  EXPECT_EQ(encode("f"), "Zg==");
  EXPECT_EQ(encode("fo"), "Zm8=");
  EXPECT_EQ(encode("foo"), "Zm9v");
  EXPECT_EQ(encode("foob"), "Zm9vYg==");
  EXPECT_EQ(encode("fooba"), "Zm9vYmE=");
  EXPECT_EQ(encode("foobar"), "Zm9vYmFy");
}

}  // namespace
}  // namespace rs::server
