#include "server/openai_request.h"

#include <gtest/gtest.h>

namespace rs::server {
namespace {

const engine::SamplingParams kDefaults{};

ApiError chat_error(const std::string& body) {
  auto parsed = parse_chat_request(body, kDefaults);
  EXPECT_TRUE(std::holds_alternative<ApiError>(parsed)) << body;
  return std::holds_alternative<ApiError>(parsed) ? std::get<ApiError>(parsed) : ApiError{};
}

ApiError completion_error(const std::string& body) {
  auto parsed = parse_completion_request(body, kDefaults);
  EXPECT_TRUE(std::holds_alternative<ApiError>(parsed)) << body;
  return std::holds_alternative<ApiError>(parsed) ? std::get<ApiError>(parsed) : ApiError{};
}

// Unknown fields (today's SDKs send prompt_cache_key, safety_identifier, verbosity; vLLM clients request_id;
// llama-server clients cache_prompt) are accepted and logged once per name, as vLLM and SGLang do;
// --strict-request-params restores OpenAI's 400. Known fields keep their type checks either way.
TEST(OpenAiRequest, UnknownFieldsAreIgnoredUnlessStrict) {
  const std::string chat = R"({"model": "m", "messages": [{"role": "user", "content": "x"}])";
  for (const char* extra : {R"("frobnicate_chat": {"deep": [1]})", R"("prompt_cache_key": "user-7")",
                            R"("safety_identifier": "h")", R"("verbosity": "low")", R"("cache_prompt": true)"}) {
    const std::string body = chat + ", " + extra + "}";
    EXPECT_TRUE(std::holds_alternative<ChatRequest>(parse_chat_request(body, kDefaults))) << body;
  }
  EXPECT_TRUE(unknown_field_logged("frobnicate_chat"));
  EXPECT_TRUE(std::holds_alternative<ChatRequest>(parse_chat_request(chat + R"(, "line\nbreak": 1})", kDefaults)));
  EXPECT_TRUE(unknown_field_logged("line\nbreak"));
  EXPECT_FALSE(unknown_field_logged("prompt_cache_key"));  // known: accepted quietly
  EXPECT_TRUE(std::holds_alternative<CompletionRequest>(
      parse_completion_request(R"({"prompt": "a", "messages": [], "request_id": "r1"})", kDefaults)));
  RequestLimits strict;
  strict.strict_fields = true;
  const auto refused = parse_chat_request(chat + R"(, "frobnicate_chat": 1})", kDefaults, strict);
  ASSERT_TRUE(std::holds_alternative<ApiError>(refused));
  EXPECT_EQ(std::get<ApiError>(refused).code, "unknown_parameter");
  EXPECT_EQ(std::get<ApiError>(refused).param, "frobnicate_chat");
  const auto completion = parse_completion_request(R"({"prompt": "a", "messages": []})", kDefaults, strict);
  ASSERT_TRUE(std::holds_alternative<ApiError>(completion));
  EXPECT_EQ(std::get<ApiError>(completion).code, "unknown_parameter");
  // A known field of the wrong type is still a 400.
  EXPECT_EQ(chat_error(chat + R"(, "temperature": "hot", "frobnicate_chat": 1})").code, "invalid_type");
}

TEST(OpenAiRequest, ConfiguredLimitsGiveErrorsThatNameThem) {
  RequestLimits limits;
  limits.max_json_depth = 4;
  limits.max_messages = 2;
  limits.max_n = 3;
  limits.max_stop = 2;
  limits.max_stop_bytes = 5;
  limits.max_top_logprobs = 2;
  const std::string user = R"({"role": "user", "content": "hi"})";
  const auto chat = [&](const std::string& fields, const std::string& messages) {
    return parse_chat_request(R"({"messages": [)" + messages + "]" + fields + "}", kDefaults, limits);
  };
  const auto error_of = [](const auto& parsed) {
    EXPECT_TRUE(std::holds_alternative<ApiError>(parsed));
    return std::holds_alternative<ApiError>(parsed) ? std::get<ApiError>(parsed) : ApiError{};
  };
  // Within every limit: accepted.
  EXPECT_TRUE(std::holds_alternative<ChatRequest>(
      chat(R"(, "n": 3, "stop": ["ab", "cdefg"], "logprobs": true, "top_logprobs": 2)", user + "," + user)));

  ApiError e = error_of(chat("", user + "," + user + "," + user));
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.param, "messages");
  EXPECT_NE(e.message.find("limit of 2"), std::string::npos) << e.message;
  EXPECT_EQ(error_of(chat(R"(, "n": 4)", user)).param, "n");
  e = error_of(chat(R"(, "stop": ["a", "b", "c"])", user));
  EXPECT_EQ(e.param, "stop");
  EXPECT_NE(e.message.find("at most 2"), std::string::npos) << e.message;
  e = error_of(chat(R"(, "stop": "toolong")", user));
  EXPECT_EQ(e.param, "stop");
  EXPECT_NE(e.message.find("5 bytes"), std::string::npos) << e.message;
  EXPECT_EQ(error_of(chat(R"(, "logprobs": true, "top_logprobs": 3)", user)).param, "top_logprobs");
  e = error_of(chat(R"(, "metadata": {"a": {"b": [1]}})", user));  // body, metadata, a, b: 4 containers
  EXPECT_NE(e.message.find("nested more than 4"), std::string::npos) << e.message;

  const auto completion = [&](const std::string& fields) {
    return parse_completion_request(R"({"prompt": "x")" + fields + "}", kDefaults, limits);
  };
  EXPECT_EQ(error_of(completion(R"(, "logprobs": 3)")).param, "logprobs");
  EXPECT_EQ(error_of(completion(R"(, "n": 4)")).param, "n");
  EXPECT_TRUE(std::holds_alternative<CompletionRequest>(completion(R"(, "logprobs": 2, "n": 3)")));
}

TEST(OpenAiRequest, VllmFieldsPriorityAndReasoningEffort) {
  const std::string messages = R"("messages": [{"role": "user", "content": "hi"}])";
  auto parsed = parse_chat_request(
      "{" + messages + R"(, "include_stop_str_in_output": true, "return_tokens_as_token_ids": true, "priority": 0,
                          "reasoning_effort": "low"})",
      kDefaults);
  ASSERT_TRUE(std::holds_alternative<ChatRequest>(parsed));
  const ChatRequest& request = std::get<ChatRequest>(parsed);
  EXPECT_TRUE(request.options.include_stop_str);
  EXPECT_TRUE(request.options.tokens_as_ids);
  EXPECT_EQ(request.template_extra["reasoning_effort"], "low");
  EXPECT_EQ(chat_error("{" + messages + R"(, "priority": 3})").param, "priority");
  EXPECT_EQ(chat_error("{" + messages + R"(, "reasoning_effort": "extreme"})").param, "reasoning_effort");

  auto echo = parse_completion_request(R"({"prompt": "x", "echo": true})", kDefaults);
  ASSERT_TRUE(std::holds_alternative<CompletionRequest>(echo));
  EXPECT_TRUE(std::get<CompletionRequest>(echo).options.echo);
  // echo with logprobs scores the prompt (its alternatives as many as logprobs asks); max_tokens 0 only with scoring.
  auto scored = parse_completion_request(R"({"prompt": "x", "echo": true, "logprobs": 2, "max_tokens": 0})", kDefaults);
  ASSERT_TRUE(std::holds_alternative<CompletionRequest>(scored));
  EXPECT_EQ(std::get<CompletionRequest>(scored).options.sampling.prompt_logprobs, 2);
  EXPECT_EQ(*std::get<CompletionRequest>(scored).options.max_tokens, 0);
  EXPECT_FALSE(std::get<CompletionRequest>(scored).options.prompt_logprobs_field);
  auto field = parse_chat_request("{" + messages + R"(, "prompt_logprobs": 3})", kDefaults);
  ASSERT_TRUE(std::holds_alternative<ChatRequest>(field));
  EXPECT_EQ(std::get<ChatRequest>(field).options.sampling.prompt_logprobs, 3);
  EXPECT_TRUE(std::get<ChatRequest>(field).options.prompt_logprobs_field);
  EXPECT_EQ(completion_error(R"({"prompt": "x", "max_tokens": 0})").param, "max_tokens");
  EXPECT_EQ(completion_error(R"({"prompt": "x", "prompt_logprobs": 99})").param, "prompt_logprobs");
}

TEST(OpenAiRequest, ContinueFinalMessageTurnsTheGenerationPromptOff) {
  const std::string messages =
      R"("messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "The answer is"}])";
  const auto chat = [&](const std::string& extra) {
    auto parsed = parse_chat_request("{" + messages + extra + "}", kDefaults);
    EXPECT_TRUE(std::holds_alternative<ChatRequest>(parsed)) << extra;
    return std::holds_alternative<ChatRequest>(parsed) ? std::get<ChatRequest>(parsed) : ChatRequest{};
  };
  EXPECT_FALSE(chat("").continue_final_message);
  EXPECT_TRUE(chat("").add_generation_prompt);
  const ChatRequest open = chat(R"(, "continue_final_message": true)");
  EXPECT_TRUE(open.continue_final_message);
  EXPECT_FALSE(open.add_generation_prompt);
  EXPECT_FALSE(chat(R"(, "continue_final_message": true, "add_generation_prompt": false)").add_generation_prompt);
  EXPECT_EQ(chat_error("{" + messages + R"(, "continue_final_message": true, "add_generation_prompt": true})").param,
            "continue_final_message");
  EXPECT_EQ(chat_error("{" + messages + R"(, "continue_final_message": "yes"})").param, "continue_final_message");
}

TEST(OpenAiRequest, LogitBiasAndMinTokens) {
  const std::string messages = R"("messages": [{"role": "user", "content": "hi"}])";
  auto parsed =
      parse_chat_request("{" + messages + R"(, "logit_bias": {"5": 2.5, "17": -100}, "min_tokens": 3})", kDefaults);
  ASSERT_TRUE(std::holds_alternative<ChatRequest>(parsed));
  const engine::SamplingParams& sampling = std::get<ChatRequest>(parsed).options.sampling;
  ASSERT_EQ(sampling.logit_bias.size(), 2u);
  EXPECT_EQ(sampling.logit_bias[0], (std::pair<int32_t, float>{5, 2.5f}));
  EXPECT_EQ(sampling.logit_bias[1], (std::pair<int32_t, float>{17, -100.0f}));
  EXPECT_EQ(sampling.min_tokens, 3);
  for (const char* bad : {R"("logit_bias": [1])", R"("logit_bias": {"x": 1})", R"("logit_bias": {"-1": 1})",
                          R"("logit_bias": {"3": 101})", R"("logit_bias": {"3": "1"})"})
    EXPECT_EQ(chat_error("{" + messages + ", " + bad + "}").param, "logit_bias") << bad;
  EXPECT_EQ(chat_error("{" + messages + R"(, "min_tokens": 5, "max_tokens": 4})").param, "min_tokens");
  EXPECT_EQ(chat_error("{" + messages + R"(, "min_tokens": -1})").param, "min_tokens");
  EXPECT_TRUE(std::holds_alternative<ChatRequest>(
      parse_chat_request("{" + messages + R"(, "spaces_between_special_tokens": false})", kDefaults)));
  EXPECT_EQ(chat_error("{" + messages + R"(, "spaces_between_special_tokens": 1})").param,
            "spaces_between_special_tokens");
}

TEST(OpenAiRequest, TokenIdsBeyondInt32AreRejectedNotWrapped) {
  auto parsed = parse_completion_request(R"({"model": "m", "prompt": [4294967297]})", kDefaults);
  ASSERT_TRUE(std::holds_alternative<ApiError>(parsed));
  EXPECT_EQ(std::get<ApiError>(parsed).param, "prompt");
  auto stop = parse_completion_request(R"({"model": "m", "prompt": [1], "stop_token_ids": [4294967298]})", kDefaults);
  ASSERT_TRUE(std::holds_alternative<ApiError>(stop));
  EXPECT_EQ(std::get<ApiError>(stop).param, "stop_token_ids");
}

// Bounds were once compared as doubles, where 2^63 equals INT64_MAX: seed 2^63 passed and wrapped to -2^63.
TEST(OpenAiRequest, IntegerBoundsAreExact) {
  const auto seed = [](const std::string& value) {
    return parse_completion_request(R"({"prompt": "a", "seed": )" + value + "}", kDefaults);
  };
  const ApiError above = std::get<ApiError>(seed("9223372036854775808"));
  EXPECT_EQ(above.code, "integer_above_max_value");
  EXPECT_EQ(above.message,
            "Invalid 'seed': integer above maximum value. Expected a value <= 9223372036854775807, but got "
            "9223372036854775808 instead.");
  EXPECT_EQ(std::get<ApiError>(seed("18446744073709551616")).code, "integer_above_max_value");  // parsed as a double
  EXPECT_EQ(std::get<ApiError>(seed("-9223372036854775809")).code, "integer_below_min_value");
  EXPECT_EQ(std::get<ApiError>(seed("9.3e18")).code, "integer_above_max_value");
  EXPECT_EQ(std::get<CompletionRequest>(seed("9223372036854775807")).options.sampling.seed, uint64_t{INT64_MAX});
  EXPECT_EQ(std::get<CompletionRequest>(seed("-9223372036854775808")).options.sampling.seed, uint64_t{1} << 63);
  EXPECT_EQ(std::get<CompletionRequest>(seed("12.0")).options.sampling.seed, 12u);
  EXPECT_EQ(
      std::get<ApiError>(parse_completion_request(R"({"prompt": "a", "max_tokens": 2147483648})", kDefaults)).code,
      "integer_above_max_value");
  EXPECT_EQ(
      std::get<ApiError>(parse_completion_request(R"({"prompt": "a", "n": 18446744073709551615})", kDefaults)).code,
      "integer_above_max_value");
}

TEST(OpenAiRequest, ToolsTurnToolCallParsingOnUnlessToolChoiceIsNone) {
  const std::string tools = R"("tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}])";
  auto parse = [](const std::string& body) {
    auto parsed = parse_chat_request(body, kDefaults);
    EXPECT_TRUE(std::holds_alternative<ChatRequest>(parsed)) << body;
    return std::get<ChatRequest>(parsed);
  };
  const std::string messages = R"("messages": [{"role": "user", "content": "hi"}])";
  EXPECT_TRUE(parse("{" + messages + ", " + tools + "}").options.parse_tool_calls);
  EXPECT_TRUE(parse("{" + messages + ", " + tools + R"(, "tool_choice": "auto"})").options.parse_tool_calls);
  EXPECT_FALSE(parse("{" + messages + ", " + tools + R"(, "tool_choice": "none"})").options.parse_tool_calls);
  EXPECT_FALSE(parse("{" + messages + "}").options.parse_tool_calls);
  EXPECT_FALSE(parse("{" + messages + R"(, "tools": []})").options.parse_tool_calls);
}

TEST(OpenAiRequest, ParsesAChatRequest) {
  auto parsed = parse_chat_request(R"({"model": "m", "messages": [{"role": "user", "content": [{"type": "text",
      "text": "hi"}, {"type": "text", "text": "there"}]}], "temperature": 0, "max_completion_tokens": 5, "n": 2,
      "stop": "x", "logprobs": true, "top_logprobs": 3, "stream": true, "stream_options": {"include_usage": true},
      "seed": 7, "top_k": 4, "user": "u"})",
                                   kDefaults);
  ASSERT_TRUE(std::holds_alternative<ChatRequest>(parsed));
  const auto& request = std::get<ChatRequest>(parsed);
  EXPECT_EQ(request.model, "m");
  EXPECT_EQ(request.messages[0]["content"], "hi\nthere");
  EXPECT_EQ(request.options.sampling.temperature, 0.0f);
  EXPECT_EQ(request.options.max_tokens, 5);
  EXPECT_EQ(request.options.n, 2);
  EXPECT_EQ(request.options.stop, std::vector<std::string>{"x"});
  EXPECT_TRUE(request.options.sampling.logprobs);
  EXPECT_EQ(request.options.sampling.top_logprobs, 3);
  EXPECT_TRUE(request.options.include_usage);
  EXPECT_EQ(request.options.sampling.seed, 7u);
  EXPECT_EQ(request.options.sampling.top_k, 4);
}

TEST(OpenAiRequest, ParsesCompletionPromptsOfEveryShape) {
  auto ids = parse_completion_request(R"({"model": "m", "prompt": [1, 2, 3]})", kDefaults);
  ASSERT_TRUE(std::holds_alternative<CompletionRequest>(ids));
  EXPECT_EQ(std::get<CompletionRequest>(ids).token_prompts, (std::vector<std::vector<int32_t>>{{1, 2, 3}}));
  EXPECT_EQ(std::get<CompletionRequest>(ids).options.max_tokens, 16);
  auto batch = parse_completion_request(R"({"model": "m", "prompt": [[1], [2, 3]], "logprobs": 2})", kDefaults);
  ASSERT_TRUE(std::holds_alternative<CompletionRequest>(batch));
  EXPECT_EQ(std::get<CompletionRequest>(batch).token_prompts.size(), 2u);
  EXPECT_EQ(std::get<CompletionRequest>(batch).options.sampling.top_logprobs, 2);
  auto texts = parse_completion_request(R"({"model": "m", "prompt": ["a", "b"]})", kDefaults);
  ASSERT_TRUE(std::holds_alternative<CompletionRequest>(texts));
  EXPECT_EQ(std::get<CompletionRequest>(texts).text_prompts.size(), 2u);
}

TEST(OpenAiRequest, UsesGenerationConfigDefaultsOnlyWhereTheRequestIsSilent) {
  const engine::SamplingParams defaults = sampling_defaults({{"temperature", 0.6}, {"top_p", 0.95}, {"top_k", 20}});
  auto parsed =
      parse_chat_request(R"({"model": "m", "messages": [{"role": "user", "content": "x"}], "top_p": 0.5})", defaults);
  const auto& options = std::get<ChatRequest>(parsed).options;
  EXPECT_FLOAT_EQ(options.sampling.temperature, 0.6f);
  EXPECT_FLOAT_EQ(options.sampling.top_p, 0.5f);
  EXPECT_EQ(options.sampling.top_k, 20);
}

TEST(OpenAiRequest, RejectsBadInputWithOpenAiStyleErrors) {
  EXPECT_EQ(chat_error("{not json").code, "invalid_json");
  EXPECT_EQ(chat_error("[1, 2]").code, "invalid_json");
  EXPECT_TRUE(std::holds_alternative<ChatRequest>(
      parse_chat_request(R"({"messages": [{"role": "user", "content": "x"}]})", kDefaults)))
      << "model may be omitted";
  EXPECT_EQ(chat_error(R"({"model": "m", "messages": []})").code, "empty_array");
  EXPECT_EQ(chat_error(R"({"model": "m"})").param, "messages");
  EXPECT_EQ(chat_error(R"({"model": "m", "messages": "hi"})").code, "invalid_type");
  EXPECT_EQ(chat_error(R"({"model": "m", "messages": [{"role": "wizard", "content": "x"}]})").param,
            "messages[0].role");
  EXPECT_EQ(chat_error(R"({"model": "m", "messages": [{"role": "user"}]})").param, "messages[0].content");
  const std::string ok_messages = R"("messages": [{"role": "user", "content": "x"}])";
  EXPECT_EQ(chat_error(R"({"model": "m", )" + ok_messages + R"(, "temperature": -1})").code, "decimal_below_min_value");
  EXPECT_EQ(chat_error(R"({"model": "m", )" + ok_messages + R"(, "temperature": "hot"})").code, "invalid_type");
  EXPECT_EQ(chat_error(R"({"model": "m", )" + ok_messages + R"(, "n": 0})").param, "n");
  EXPECT_EQ(chat_error(R"({"model": "m", )" + ok_messages + R"(, "n": 1.5})").code, "invalid_type");
  EXPECT_EQ(chat_error(R"({"model": "m", )" + ok_messages + R"(, "max_tokens": 0})").param, "max_tokens");
  EXPECT_EQ(chat_error(R"({"model": "m", )" + ok_messages + R"(, "top_logprobs": 2})").param, "top_logprobs");
  EXPECT_EQ(chat_error(R"({"model": "m", )" + ok_messages + R"(, "stream_options": {"include_usage": true}})").param,
            "stream_options");
  EXPECT_EQ(chat_error(R"({"model": "m", )" + ok_messages + R"(, "stop": ["a", "b", "c", "d", "e"]})").param, "stop");
  EXPECT_EQ(chat_error(R"({"model": "m", )" + ok_messages + R"(, "logit_bias": {"1": 500}})").param, "logit_bias");
  EXPECT_EQ(completion_error(R"({"model": "m"})").param, "prompt");
  EXPECT_EQ(completion_error(R"({"model": "m", "prompt": []})").param, "prompt");
  EXPECT_EQ(completion_error(R"({"model": "m", "prompt": [1, "a"]})").param, "prompt");
  EXPECT_EQ(completion_error(R"({"model": "m", "prompt": "a", "logprobs": 9})").param, "logprobs");
  EXPECT_EQ(chat_error(R"({"model": 3, )" + ok_messages + "}").param, "model");
}

// A deeply nested body once overflowed the HTTP thread's stack (copying JSON recurses per level); it is refused
// while parsing, before anything copies it.
TEST(OpenAiRequest, DeeplyNestedBodiesAreRefusedWhileParsing) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  ApiError error = chat_error(R"({"messages": [{"role": "user", "content": "x", "name": )" + deep + "}]}");
  EXPECT_EQ(error.status, 400);
  EXPECT_EQ(error.code, "invalid_json");
  EXPECT_NE(error.message.find("nested"), std::string::npos) << error.message;
  EXPECT_EQ(completion_error(R"({"prompt": "x", "chat_template_kwargs": )" + deep + "}").code, "invalid_json");
  // Just inside the limit (the body object is level 1) still parses.
  const int inner = kMaxJsonDepth - 3;  // body, messages array and message object take three levels
  auto parsed = parse_chat_request(R"({"messages": [{"role": "user", "content": "x", "name": )" +
                                       std::string(inner, '[') + std::string(inner, ']') + "}]}",
                                   kDefaults);
  if (auto* e = std::get_if<ApiError>(&parsed)) {
    EXPECT_NE(e->code, "invalid_json") << e->message;
  }
  ApiError one_more = chat_error(R"({"messages": [{"role": "user", "content": "x", "name": )" +
                                 std::string(inner + 1, '[') + std::string(inner + 1, ']') + "}]}");
  EXPECT_EQ(one_more.code, "invalid_json");
}

}  // namespace
}  // namespace rs::server
