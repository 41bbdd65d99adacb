#include "server/tokenize_routes.h"

#include <gtest/gtest.h>

namespace rs::server {
namespace {

using json = nlohmann::json;

ServingModel byte_level_model() {
  ServingModel model{.name = "m", .max_context = 64, .vocab_size = 276};
  model.text = ModelText::load(std::string(RS_SOURCE_DIR) + "/tests/tokenizer/data/byte_level");
  return model;
}

// The model field reads as the completions endpoints read it: absent, null or "" is the served model, another
// string a 404 naming it as given, anything else a 400.
TEST(TokenizeRoutes, ModelFieldReadsAsInCompletions) {
  const ServingModel model = byte_level_model();
  for (const char* body : {R"({"prompt": "hello"})", R"({"model": null, "prompt": "hello"})",
                           R"({"model": "", "prompt": "hello"})", R"({"model": "m", "prompt": "hello"})"}) {
    const auto result = tokenize_request(model, body);
    ASSERT_TRUE(std::holds_alternative<json>(result)) << body << ": " << std::get<ApiError>(result).message;
    EXPECT_EQ(std::get<json>(result)["tokens"], json({257, 261, 111})) << body;  // he ll o
  }
  const auto unknown = tokenize_request(model, R"({"model": "nope", "prompt": "hello"})");
  ASSERT_TRUE(std::holds_alternative<ApiError>(unknown));
  EXPECT_EQ(std::get<ApiError>(unknown).status, 404);
  EXPECT_EQ(std::get<ApiError>(unknown).message, "The model `nope` does not exist or you do not have access to it.");
  const auto number = detokenize_request(model, R"({"model": 5, "tokens": [264]})");
  ASSERT_TRUE(std::holds_alternative<ApiError>(number));
  EXPECT_EQ(std::get<ApiError>(number).status, 400);
  EXPECT_EQ(std::get<ApiError>(number).param, "model");
  EXPECT_TRUE(std::holds_alternative<json>(detokenize_request(model, R"({"model": null, "tokens": [264]})")));
}

}  // namespace
}  // namespace rs::server
