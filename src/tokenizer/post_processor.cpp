// TemplateProcessing for single sequences (HF tokenizers processors/template.rs).
#include "tokenizer/post_processor.h"

#include <nlohmann/json.hpp>

#include "base/error.h"

namespace rs::tokenizer {

void PostProcessor::append_steps(const nlohmann::json& config) {
  const std::string type = config.at("type").get<std::string>();
  if (type == "Sequence") {
    for (const auto& child : config.at("processors")) append_steps(child);
  } else if (type == "ByteLevel") {
    // Only adjusts offsets; ids are unchanged.
  } else if (type == "TemplateProcessing") {
    RS_CHECK(!single_.has_value(), "unsupported tokenizer.json feature: two TemplateProcessing");
    const nlohmann::json& special_tokens = config.at("special_tokens");
    std::vector<Item> items;
    for (const auto& piece : config.at("single")) {
      if (piece.contains("Sequence")) {
        const std::string id = piece.at("Sequence").at("id").get<std::string>();
        RS_CHECK(id == "A", "TemplateProcessing single template names sequence '{}'", id);
        items.push_back({true, {}});
      } else if (piece.contains("SpecialToken")) {
        const std::string name = piece.at("SpecialToken").at("id").get<std::string>();
        RS_CHECK(special_tokens.contains(name), "TemplateProcessing: unknown special token '{}'", name);
        items.push_back({false, special_tokens.at(name).at("ids").get<std::vector<int32_t>>()});
      } else {
        RS_FAIL("TemplateProcessing: unsupported template piece {}", piece.dump());
      }
    }
    single_ = std::move(items);
  } else {
    RS_FAIL("unsupported tokenizer.json feature: post_processor type '{}'", type);
  }
}

PostProcessor PostProcessor::from_json(const nlohmann::json& config) {
  PostProcessor processor;
  if (!config.is_null()) processor.append_steps(config);
  return processor;
}

PostProcessor PostProcessor::bos_eos_template(std::optional<int32_t> bos_id, std::optional<int32_t> eos_id) {
  PostProcessor processor;
  std::vector<Item> items;
  if (bos_id) items.push_back({false, {*bos_id}});
  items.push_back({true, {}});
  if (eos_id) items.push_back({false, {*eos_id}});
  processor.single_ = std::move(items);
  return processor;
}

void PostProcessor::process(std::vector<int32_t>& ids, bool add_special_tokens) const {
  if (!add_special_tokens || !single_) return;
  std::vector<int32_t> out;
  out.reserve(ids.size() + 4);
  for (const Item& item : *single_) {
    if (item.is_sequence)
      out.insert(out.end(), ids.begin(), ids.end());
    else
      out.insert(out.end(), item.ids.begin(), item.ids.end());
  }
  ids = std::move(out);
}

}  // namespace rs::tokenizer
