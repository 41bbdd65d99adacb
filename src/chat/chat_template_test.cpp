// ChatTemplate: loading from a model directory (template sources, special tokens, format choice) and the
// variables a template sees, on small hand-written templates.
#include "chat/chat_template.h"

#include <gtest/gtest.h>

#include <fstream>

#include "chat/template_error.h"
#include "chat/test_util.h"

namespace rs::chat {
namespace {

using Json = nlohmann::ordered_json;

// A throwaway model directory under the system temp dir.
class ModelDir {
 public:
  ModelDir() {
    static int counter = 0;
    path_ = std::filesystem::temp_directory_path() /
            ("rs_chat_template_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::create_directories(path_);
  }
  ~ModelDir() { std::filesystem::remove_all(path_); }
  void write(const std::string& name, const std::string& text) const { std::ofstream(path_ / name) << text; }
  void write_json(const std::string& name, const Json& json) const { write(name, json.dump()); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

ChatTemplate load_pinned(const ModelDir& dir, ChatFormat format = ChatFormat::kAuto) {
  ChatTemplate chat = ChatTemplate::load(dir.path(), format);
  chat.set_clock(testing::fixed_now);
  return chat;
}

const Json kHello = Json::parse(R"([{"role": "user", "content": "hi"}])");

TEST(ChatTemplateTest, RendersTokenizerConfigTemplateWithSpecialTokens) {
  ModelDir dir;
  dir.write_json("tokenizer_config.json", {{"chat_template",
                                            "{{ bos_token }}{% for m in messages %}[{{ m.role }}:{{ m.content }}]"
                                            "{% endfor %}{% if add_generation_prompt %}>{% endif %}{{ eos_token }}"},
                                           {"bos_token", "<s>"},
                                           {"eos_token", {{"content", "</s>"}, {"special", true}}}});
  const ChatTemplate chat = load_pinned(dir);
  EXPECT_EQ(chat.format(), ChatFormat::kJinja);
  EXPECT_EQ(chat.bos_token(), "<s>");
  EXPECT_EQ(chat.eos_token(), "</s>");
  EXPECT_EQ(chat.render(kHello, true), "<s>[user:hi]></s>");
  EXPECT_EQ(chat.render(kHello, false), "<s>[user:hi]</s>");
}

TEST(ChatTemplateTest, VariablesFollowApplyChatTemplate) {
  ModelDir dir;
  dir.write_json("tokenizer_config.json",
                 {{"chat_template",
                   "{{ tools is none }} {{ documents is none }} {{ bos_token is defined }} {{ flag }} "
                   "{{ tools | tojson if tools else '' }} {{ strftime_now('%d %b %Y') }}"},
                  {"bos_token", nullptr}});
  const ChatTemplate chat = load_pinned(dir);
  EXPECT_EQ(chat.render(kHello, false), "True True False   05 Aug 2025");
  // Tool schemas keep the client's key order through tojson.
  const Json extra = Json::parse(R"({"flag": 1, "tools": [{"z": 1, "a": {"y": 2, "b": 3}}]})");
  EXPECT_EQ(chat.render(kHello, false, extra), R"(False True False 1 [{"z": 1, "a": {"y": 2, "b": 3}}] 05 Aug 2025)");
  EXPECT_THROW(chat.render(kHello, false, Json::parse(R"({"messages": []})")), rs::Error);
}

TEST(ChatTemplateTest, NamedTemplatesPickToolUseWhenToolsAreGiven) {
  ModelDir dir;
  dir.write_json(
      "tokenizer_config.json",
      {{"chat_template", Json::array({{{"name", "default"}, {"template", "plain"}},
                                      {{"name", "tool_use"}, {"template", "tools:{{ tools | length }}"}}})}});
  const ChatTemplate chat = load_pinned(dir);
  EXPECT_EQ(chat.render(kHello, false), "plain");
  EXPECT_EQ(chat.render(kHello, false, Json::parse(R"({"tools": [{}, {}]})")), "tools:2");
}

TEST(ChatTemplateTest, ChatTemplateJinjaFileWins) {
  ModelDir dir;
  dir.write_json("tokenizer_config.json", {{"chat_template", "from config"}});
  dir.write("chat_template.jinja", "from file {{ messages[0].content }}\n");
  EXPECT_EQ(load_pinned(dir).render(kHello, false), "from file hi");
}

TEST(ChatTemplateTest, ChoosesHarmonyForGptOss) {
  ModelDir by_config;
  by_config.write_json("tokenizer_config.json", {{"chat_template", "jinja {{ 1 }}"}});
  by_config.write_json("config.json", {{"model_type", "gpt_oss"}});
  EXPECT_EQ(load_pinned(by_config).format(), ChatFormat::kHarmony);
  EXPECT_EQ(load_pinned(by_config, ChatFormat::kJinja).render(kHello, false), "jinja 1");

  ModelDir by_template;
  by_template.write("chat_template.jinja", "<|start|>user<|channel|>x<|message|>");
  EXPECT_EQ(load_pinned(by_template).format(), ChatFormat::kHarmony);

  ModelDir by_tokens;
  by_tokens.write_json(
      "tokenizer_config.json",
      {{"added_tokens_decoder", {{"200005", {{"content", "<|channel|>"}}}, {"200006", {{"content", "<|start|>"}}}}}});
  const ChatTemplate chat = load_pinned(by_tokens);
  EXPECT_EQ(chat.format(), ChatFormat::kHarmony);
  EXPECT_EQ(chat.render(kHello, true),
            "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\nKnowledge cutoff: "
            "2024-06\nCurrent date: 2025-08-05\n\nReasoning: medium\n\n# Valid channels: analysis, commentary, final. "
            "Channel must be included for every message.<|end|><|start|>user<|message|>hi<|end|><|start|>assistant");
}

TEST(ChatTemplateTest, LoadErrors) {
  ModelDir empty;
  EXPECT_THROW(ChatTemplate::load(empty.path()), rs::Error);
  EXPECT_THROW(ChatTemplate::load(empty.path() / "missing"), rs::Error);
  ModelDir broken;
  broken.write_json("tokenizer_config.json", {{"chat_template", "line1\n{% for m in messages %}"}});
  try {
    ChatTemplate::load(broken.path());
    FAIL() << "expected TemplateError";
  } catch (const TemplateError& error) {
    EXPECT_EQ(error.pos().line, 2);
  }
  ModelDir bad_json;
  bad_json.write("tokenizer_config.json", "{not json");
  EXPECT_THROW(ChatTemplate::load(bad_json.path()), rs::Error);
}

TEST(ChatTemplateTest, RenderErrorsAreTyped) {
  ModelDir dir;
  dir.write_json("tokenizer_config.json",
                 {{"chat_template",
                   "{% if messages[0].role != 'system' %}{{ raise_exception('system first') }}{% endif %}"
                   "{{ messages[1].content.upper() }}"}});
  const ChatTemplate chat = load_pinned(dir);
  try {
    chat.render(kHello, false);
    FAIL() << "expected TemplateRaised";
  } catch (const TemplateRaised& raised) {
    EXPECT_STREQ(raised.what(), "system first");
  }
  EXPECT_THROW(chat.render(Json::parse(R"([{"role": "system", "content": "s"}])"), false), TemplateError);
}

}  // namespace
}  // namespace rs::chat
