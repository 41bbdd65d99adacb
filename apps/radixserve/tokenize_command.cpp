// `radixserve tokenize`: encode stdin text to ids or decode ids to text with a model's tokenizer.
#include <iostream>
#include <iterator>
#include <string>

#include <nlohmann/json.hpp>

#include "apps/radixserve/commands.h"
#include "apps/radixserve/model_option.h"
#include "base/error.h"
#include "tokenizer/tokenizer.h"

namespace rs::app {
namespace {

struct TokenizeOptions {
  std::string model_dir;
  bool decode = false;
  bool skip_special_tokens = false;
  bool jsonl = false;
};

std::string dump(const nlohmann::json& value) {
  // Non-ASCII stays UTF-8; decode output is always valid UTF-8 (invalid bytes become U+FFFD).
  return value.dump(-1, ' ', /*ensure_ascii=*/false);
}

nlohmann::json parse(const std::string& text, const std::string& where) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& error) {
    RS_FAIL("tokenize: {} is not valid JSON: {}", where, error.what());
  }
}

// One request -> one result object: a string to encode, or {"ids": [...]} to decode.
nlohmann::json run_one(const tokenizer::Tokenizer& tok, const TokenizeOptions& options, const nlohmann::json& input,
                       const std::string& where) {
  if (options.decode) {
    RS_CHECK(input.is_object() && input.contains("ids") && input.at("ids").is_array(),
             "tokenize --decode: {} must be an object {{\"ids\": [...]}}", where);
    std::vector<int32_t> ids;
    for (const auto& id : input.at("ids")) {
      RS_CHECK(id.is_number_integer(), "tokenize --decode: {} has a non-integer id {}", where, id.dump());
      // Compared as 64-bit (or unsigned) integers: get<int32_t>() would wrap 4294967297 to 1.
      const bool known = id.is_number_unsigned() ? id.get<uint64_t>() < static_cast<uint64_t>(tok.vocab_size())
                                                 : id.get<int64_t>() >= 0 && id.get<int64_t>() < tok.vocab_size();
      RS_CHECK(known, "tokenize --decode: {} has id {}, outside the vocabulary [0, {})", where, id.dump(),
               tok.vocab_size());
      ids.push_back(id.get<int32_t>());
    }
    return {{"text", tok.decode(ids, options.skip_special_tokens)}};
  }
  RS_CHECK(input.is_string(), "tokenize: {} must be a JSON string", where);
  return {{"ids", tok.encode(input.get<std::string>(), tok.add_special_tokens_default())}};
}

void run_tokenize(const TokenizeOptions& options) {
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::load(options.model_dir);
  std::ios::sync_with_stdio(false);
  if (options.jsonl) {
    std::string line;
    for (int line_number = 1; std::getline(std::cin, line); ++line_number) {
      const std::string where = fmt::format("input line {}", line_number);
      std::cout << dump(run_one(tok, options, parse(line, where), where)) << '\n';
    }
    std::cout.flush();
    return;
  }
  const std::string input(std::istreambuf_iterator<char>(std::cin), {});
  // Plain mode encodes stdin byte for byte (a trailing newline is part of the text).
  const nlohmann::json request = options.decode ? parse(input, "stdin") : nlohmann::json(input);
  std::cout << dump(run_one(tok, options, request, "stdin")) << std::endl;
}

}  // namespace

void add_tokenize_command(CLI::App& app) {
  auto options = std::make_shared<TokenizeOptions>();
  CLI::App* command =
      app.add_subcommand("tokenize", "Encode UTF-8 text from stdin to {\"ids\": [...]}, or decode with --decode");
  command->add_option("--model", options->model_dir, "Model directory holding tokenizer.json, or a GGUF file")
      ->required()
      ->transform(model_folder());
  command->add_flag("--decode", options->decode, "Read {\"ids\": [...]} and print {\"text\": ...}");
  command->add_flag("--skip-special-tokens", options->skip_special_tokens, "With --decode: drop special tokens");
  command->add_flag("--jsonl", options->jsonl,
                    "One JSON value per input line (a string, or {\"ids\": [...]} with --decode); "
                    "one result per output line");
  command->callback([options] { run_tokenize(*options); });
}

}  // namespace rs::app
