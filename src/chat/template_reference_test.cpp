// The interpreter against python3-jinja2 (configured as transformers): every snippet in
// tests/chat/template_snippets.txt and a few whitespace edge cases must render byte-identically, or fail
// in both (raise_exception as TemplateRaised, anything else as TemplateError).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "chat/reference_renderer.h"
#include "chat/template_error.h"
#include "chat/test_util.h"

namespace rs::chat {
namespace {

constexpr std::string_view kVariables = R"({"d": {"b": 1, "a": 2}, "messages": [{"role": "user", "content": "hi"},
  {"role": "assistant", "content": "yo"}, {"role": "user", "content": "bye"}]})";

std::vector<std::string> load_snippets() {
  std::ifstream in(testing::source_path("tests/chat/template_snippets.txt"));
  std::ostringstream text;
  text << in.rdbuf();
  const std::string all = text.str();
  std::vector<std::string> snippets;
  const std::string separator = "\n===\n";
  size_t start = 0;
  while (start <= all.size()) {
    const size_t end = std::min(all.find(separator, start), all.size());
    std::string block = all.substr(start, end - start);
    if (!block.empty() && block.rfind("##", 0) != 0) snippets.push_back(std::move(block));
    start = end + separator.size();
  }
  return snippets;
}

// Whitespace handling with characters that do not survive a text fixture well (CR, tabs, trailing newlines).
const std::vector<std::string> kWhitespaceCases = {
    "a\r\nb\r\n{% if true %}\r\n  c\r\n{% endif %}\r\n",
    "x\n\n",
    "\t{% if true %}\tA{% endif %}\t\n",
    "{{ 'a' }}  {% if true %}b{% endif %}",
    "{{ 'a' }}\n  {% if true %}b{% endif %}",
    "{% if true +%}\nx{% endif %}",
    "{% if true %}  \nx{% endif %}",
    "a {{- ' b ' -}} c\n d",
    "{%- if true %}\n\n  x\n{% endif -%}\n\n y",
    "   {#- c -#}   \n  z",
    "{% for i in [1,2] -%}\n    {{ i }}\n{%- endfor %}",
    "  {% raw %}  {{ x }}  {% endraw %}  \nq",
    "{% if true %}{% if true %}\n  inner\n{% endif %}{% endif %}",
    "line\n  {% if false %}no{% else %}yes{% endif %}\n  end",
    "{%- macro m() %}\n  body\n{% endmacro %}\n[{{ m() }}]",
};

TEST(TemplateReferenceTest, SnippetsMatchJinja2) {
  std::vector<std::string> sources = load_snippets();
  ASSERT_GT(sources.size(), 100u) << "tests/chat/template_snippets.txt missing or truncated";
  sources.insert(sources.end(), kWhitespaceCases.begin(), kWhitespaceCases.end());
  const auto variables_json = nlohmann::ordered_json::parse(kVariables);
  nlohmann::ordered_json cases = {{"cases", nlohmann::ordered_json::array()}};
  for (const std::string& source : sources)
    cases["cases"].push_back({{"template", source}, {"variables", variables_json}});
  const auto expected = testing::render_reference(testing::Reference::kJinja2, cases);

  int identical = 0;
  int both_failed = 0;
  const Dict variables = testing::variables_from_json(variables_json);
  for (size_t i = 0; i < sources.size(); ++i) {
    SCOPED_TRACE("template: " + sources[i]);
    std::string output;
    std::string error = "none";
    try {
      output = Template::parse(sources[i]).render(variables, testing::fixed_now());
    } catch (const TemplateRaised& raised) {
      error = "TemplateRaised";
      output = raised.what();
    } catch (const TemplateError& failure) {
      error = "TemplateError";
      output = failure.what();
    }
    if (expected[i].ok) {
      EXPECT_EQ(error, "none") << output;
      EXPECT_EQ(output, expected[i].output);
      identical += error == "none" && output == expected[i].output;
    } else {
      EXPECT_EQ(error, expected[i].error == "TemplateError" ? "TemplateRaised" : "TemplateError")
          << "jinja2: " << expected[i].error << ": " << expected[i].message;
      both_failed += error != "none";
    }
  }
  std::printf("[ reference ] %d snippets byte-identical to jinja2, %d failing in both (of %zu)\n", identical,
              both_failed, sources.size());
}

}  // namespace
}  // namespace rs::chat
