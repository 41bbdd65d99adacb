// `radixserve chat-template`: renders a conversation with a model's chat template and prints the prompt
// exactly (no trailing newline added), for checking what the server will feed the model.
#include <CLI/CLI.hpp>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "apps/radixserve/model_option.h"
#include "base/error.h"
#include "chat/chat_template.h"

namespace rs::app {
namespace {

struct ChatTemplateOptions {
  std::string model_dir;
  std::string messages_file;  // [messages...] or {"messages": [...], "tools": [...]}
  bool add_generation_prompt = false;
  std::string kwargs_json;  // extra template variables as a JSON object
};

nlohmann::ordered_json parse_json(const std::string& text, const std::string& what) {
  try {
    return nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::exception& error) {
    RS_FAIL("{}: invalid JSON: {}", what, error.what());
  }
}

void run_chat_template(const ChatTemplateOptions& options) {
  std::ifstream in(options.messages_file, std::ios::binary);
  RS_CHECK(in, "cannot open {}", options.messages_file);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const nlohmann::ordered_json input = parse_json(text, options.messages_file);

  nlohmann::ordered_json messages;
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();
  if (input.is_array()) {
    messages = input;
  } else {
    RS_CHECK(input.is_object() && input.contains("messages") && input["messages"].is_array(),
             "{}: expected a JSON array of messages or an object with a \"messages\" array", options.messages_file);
    messages = input["messages"];
    if (input.contains("tools")) extra["tools"] = input["tools"];
  }
  if (!options.kwargs_json.empty()) {
    const nlohmann::ordered_json kwargs = parse_json(options.kwargs_json, "--kwargs");
    RS_CHECK(kwargs.is_object(), "--kwargs must be a JSON object");
    for (auto it = kwargs.begin(); it != kwargs.end(); ++it) extra[it.key()] = it.value();
  }

  const chat::ChatTemplate chat_template = chat::ChatTemplate::load(options.model_dir);
  std::cout << chat_template.render(messages, options.add_generation_prompt, extra) << std::flush;
}

}  // namespace

// Registers the subcommand; errors (bad files, template errors) are thrown as rs::Error from app.parse().
void add_chat_template_command(CLI::App& app) {
  auto options = std::make_shared<ChatTemplateOptions>();
  CLI::App* command =
      app.add_subcommand("chat-template", "Render a conversation with a model's chat template and print the prompt");
  command
      ->add_option("--model", options->model_dir,
                   "Model directory (tokenizer_config.json, chat_template.jinja, config.json)")
      ->required()
      ->transform(model_folder());
  command
      ->add_option("--messages", options->messages_file,
                   "JSON file: an array of messages, or {\"messages\": [...], \"tools\": [...]}")
      ->required()
      ->check(CLI::ExistingFile);
  command->add_flag("--add-generation-prompt", options->add_generation_prompt,
                    "End with the assistant turn header, as for generation");
  command->add_option("--kwargs", options->kwargs_json,
                      "JSON object of extra template variables, e.g. '{\"enable_thinking\": false}'");
  command->callback([options] { run_chat_template(*options); });
}

}  // namespace rs::app
