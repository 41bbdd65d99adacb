#include "server/chat_messages.h"

#include <gtest/gtest.h>

#include <ctime>
#include <string>

#include "chat/template.h"
#include "chat/template_error.h"
#include "chat/value.h"
#include "server/openai_request.h"

namespace rs::server {
namespace {

using json = nlohmann::ordered_json;

json normalized(const std::string& messages) {
  auto result = normalize_chat_messages(json::parse(messages));
  if (auto* error = std::get_if<ApiError>(&result)) {
    ADD_FAILURE() << error->message;
    return json();
  }
  return std::get<json>(result);
}

ApiError error_of(const std::string& messages) {
  auto result = normalize_chat_messages(json::parse(messages));
  EXPECT_TRUE(std::holds_alternative<ApiError>(result)) << messages;
  return std::holds_alternative<ApiError>(result) ? std::get<ApiError>(result) : ApiError{};
}

// What the official openai npm client sends back after a tool call.
const char* kToolRoundTrip = R"([
  {"role": "user", "content": "Weather in Paris?"},
  {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
   "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\",\"units\":{\"temp\":\"C\"},\"a\":1}"}}]},
  {"role": "tool", "tool_call_id": "call_1", "content": [{"type": "text", "text": "18"}, {"type": "text", "text": "sunny"}]}
])";

TEST(ChatMessages, NullOrMissingAssistantContentBecomesEmpty) {
  const json out = normalized(kToolRoundTrip);
  EXPECT_EQ(out[1]["content"], "");
  EXPECT_EQ(normalized(R"([{"role": "assistant", "tool_calls": []}])")[0]["content"], "");
  // Other roles still need content, as OpenAI requires.
  EXPECT_EQ(error_of(R"([{"role": "user", "content": null}])").param, "messages[0].content");
  EXPECT_EQ(error_of(R"([{"role": "tool", "tool_call_id": "c"}])").param, "messages[0].content");
}

TEST(ChatMessages, TextPartsAreJoinedWithNewlines) {
  EXPECT_STREQ(kContentPartSeparator, "\n");
  EXPECT_EQ(normalized(R"([{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": ""},
                                                        {"type": "text", "text": "b"}]}])")[0]["content"],
            "a\n\nb");
  EXPECT_EQ(normalized(R"([{"role": "system", "content": []}])")[0]["content"], "");
  EXPECT_EQ(normalized(R"([{"role": "assistant", "content": [{"type": "text", "text": "x"}]}])")[0]["content"], "x");
  EXPECT_EQ(normalized(kToolRoundTrip)[2]["content"], "18\nsunny");
}

TEST(ChatMessages, NonTextPartsAreRefusedClearly) {
  ApiError image = error_of(
      R"([{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "image_url", "image_url": {"url": "x"}}]}])");
  EXPECT_EQ(image.status, 400);
  EXPECT_EQ(image.param, "messages[0].content[1]");
  EXPECT_EQ(image.code, "invalid_content");
  EXPECT_NE(image.message.find("'image_url'"), std::string::npos) << image.message;
  EXPECT_NE(image.message.find("text only"), std::string::npos) << image.message;
  EXPECT_EQ(error_of(R"([{"role": "tool", "tool_call_id": "c", "content": ["18"]}])").param, "messages[0].content[0]");
  EXPECT_EQ(error_of(R"([{"role": "user", "content": [{"text": "a"}]}])").param, "messages[0].content[0]");
  EXPECT_EQ(error_of(R"([{"role": "user", "content": [{"type": "text", "text": 5}]}])").param,
            "messages[0].content[0].text");
  EXPECT_EQ(error_of(R"([{"role": "user", "content": 5}])").code, "invalid_type");
}

TEST(ChatMessages, JsonStringArgumentsBecomeObjectsInOrder) {
  const json out = normalized(kToolRoundTrip);
  const json& arguments = out[1]["tool_calls"][0]["function"]["arguments"];
  ASSERT_TRUE(arguments.is_object());
  EXPECT_EQ(arguments.dump(), R"({"city":"Paris","units":{"temp":"C"},"a":1})");  // the client's key order
  EXPECT_EQ(out[1]["tool_calls"][0]["id"], "call_1");
  // Everything else passes through.
  EXPECT_EQ(out[2]["tool_call_id"], "call_1");
  EXPECT_EQ(out[0], json::parse(kToolRoundTrip)[0]);
}

TEST(ChatMessages, ArgumentsThatAreNotAJsonObjectStayAsTheyAre) {
  auto arguments_of = [](const std::string& arguments) {
    const json out = normalized(R"([{"role": "assistant", "content": null, "tool_calls": [{"type": "function",
        "function": {"name": "f", "arguments": )" +
                                arguments + "}}]}]");
    return out[0]["tool_calls"][0]["function"]["arguments"];
  };
  EXPECT_EQ(arguments_of(R"("{not json")"), "{not json");
  EXPECT_EQ(arguments_of(R"("")"), "");
  EXPECT_EQ(arguments_of(R"("[1, 2]")"), "[1, 2]");
  EXPECT_EQ(arguments_of(R"("\"text\"")"), "\"text\"");
  EXPECT_EQ(arguments_of(R"({"x": 1})"), json::parse(R"({"x": 1})"));  // already an object
}

TEST(ChatMessages, ToolCallsShapeIsChecked) {
  EXPECT_FALSE(normalized(R"([{"role": "assistant", "content": "x", "tool_calls": null}])")[0].contains("tool_calls"));
  EXPECT_FALSE(normalized(R"([{"role": "assistant", "content": "x", "tool_calls": []}])")[0].contains("tool_calls"));
  EXPECT_EQ(error_of(R"([{"role": "assistant", "content": null, "tool_calls": {}}])").param, "messages[0].tool_calls");
  EXPECT_EQ(error_of(R"([{"role": "assistant", "content": null, "tool_calls": [3]}])").param,
            "messages[0].tool_calls[0]");
  EXPECT_EQ(error_of(R"([{"role": "assistant", "content": null, "tool_calls": [{"function": "f"}]}])").param,
            "messages[0].tool_calls[0].function");
}

// Parsed arguments may nest no deeper than the request body could: converting them for the template recurses.
TEST(ChatMessages, DeeplyNestedArgumentsAreRefused) {
  auto with_arguments = [](int depth) {
    std::string arguments = R"({\"a\": )" + std::string(depth - 1, '[') + std::string(depth - 1, ']') + "}";
    return R"([{"role": "assistant", "content": null, "tool_calls": [{"function": {"name": "f", "arguments": ")" +
           arguments + R"("}}]}])";
  };
  const int limit = kMaxJsonDepth - 6;
  EXPECT_TRUE(normalized(with_arguments(limit))[0]["tool_calls"][0]["function"]["arguments"].is_object());
  ApiError error = error_of(with_arguments(limit + 1));
  EXPECT_EQ(error.param, "messages[0].tool_calls[0].function.arguments");
  EXPECT_EQ(error.code, "invalid_json");
  error_of(with_arguments(100000));
}

TEST(ChatMessages, RolesAreChecked) {
  EXPECT_EQ(error_of(R"([{"role": "wizard", "content": "x"}])").param, "messages[0].role");
  EXPECT_EQ(error_of(R"([{"content": "x"}])").param, "messages[0].role");
  EXPECT_EQ(error_of(R"(["hi"])").param, "messages[0]");
}

// The assistant and tool branches of Qwen3's chat template: raw wire-format messages fail exactly as they do in
// Jinja2; normalised ones render the call's arguments as an object.
TEST(ChatMessages, Qwen3TemplateRendersNormalisedToolRoundTrips) {
  const chat::Template qwen3 = chat::Template::parse(R"({%- for message in messages %}
{%- if message.role == "assistant" %}
{%- if '</think>' in message.content %}THINK{% endif %}
{{- '<|im_start|>assistant\n' + message.content }}
{%- for tool_call in message.tool_calls %}
{%- if tool_call.function %}{%- set tool_call = tool_call.function %}{%- endif %}
{{- '<tool_call>\n{"name": "' + tool_call.name + '", "arguments": ' + (tool_call.arguments | tojson) + '}\n</tool_call>' }}
{%- endfor %}
{{- '<|im_end|>\n' }}
{%- elif message.role == "tool" %}
{{- '<|im_start|>user\n<tool_response>\n' + message.content + '\n</tool_response><|im_end|>\n' }}
{%- else %}
{{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>\n' }}
{%- endif %}
{%- endfor %})");
  auto render = [&](const json& messages) {
    chat::Dict variables;
    variables.set("messages", chat::Value::from_json(messages));
    return qwen3.render(variables, std::tm{});
  };
  EXPECT_THROW(render(json::parse(kToolRoundTrip)), chat::TemplateError);
  EXPECT_EQ(render(normalized(kToolRoundTrip)),
            "<|im_start|>user\nWeather in Paris?<|im_end|>\n"
            "<|im_start|>assistant\n<tool_call>\n"
            R"({"name": "get_weather", "arguments": {"city": "Paris", "units": {"temp": "C"}, "a": 1}})"
            "\n</tool_call><|im_end|>\n"
            "<|im_start|>user\n<tool_response>\n18\nsunny\n</tool_response><|im_end|>\n");
}

}  // namespace
}  // namespace rs::server
