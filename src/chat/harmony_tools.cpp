// Tool declarations of the gpt-oss prompt: JSON-schema -> the TypeScript-like types of the HF template's
// render_typescript_type / render_tool_namespace macros, quirks included (the newline and 16 spaces before
// nested object property types, 20 spaces before oneOf defaults, " | \n" between oneOf variants).
#include <fmt/format.h>

#include "chat/builtins.h"
#include "chat/harmony_internal.h"
#include "chat/python_format.h"
#include "chat/template_error.h"
#include "chat/utf8.h"

namespace rs::chat {
namespace {

bool is_text(const Value& value, std::string_view expected) {
  return value.is_string() && value.as_string() == expected;
}

std::string join_text(const Value& items, const std::string& separator) {
  std::string out;
  bool first = true;
  for (const Value& item : iterate(items)) {
    if (!first) out += separator;
    first = false;
    out += to_str(item);
  }
  return out;
}

std::string array_type(const Value& spec) {
  const Value& items = harmony::field(spec, "items");
  std::string out;
  if (!truthy(items)) {
    out = "any[]";
  } else {
    const Value& item_type = harmony::field(items, "type");
    if (is_text(item_type, "string")) {
      out = "string[]";
    } else if (is_text(item_type, "number") || is_text(item_type, "integer")) {
      out = "number[]";
    } else if (is_text(item_type, "boolean")) {
      out = "boolean[]";
    } else {
      const std::string inner = harmony::typescript_type(items);
      out = inner == "object | object" || utf8_length(inner) > 50 ? "any[]" : inner + "[]";
    }
  }
  if (truthy(harmony::field(spec, "nullable"))) out += " | null";
  return out;
}

// The template's has_object_variants flag is set inside a for loop, where jinja2 scoping discards it, so
// every oneOf renders its variants.
std::string one_of_type(const Value& spec) {
  std::string out;
  const List variants = iterate(harmony::field(spec, "oneOf"));
  for (size_t i = 0; i < variants.size(); ++i) {
    const Value& variant = variants[i];
    out += harmony::typescript_type(variant);
    const Value& description = harmony::field(variant, "description");
    if (truthy(description)) out += "// " + harmony::text(description, "oneOf description");
    const Value& fallback = harmony::field(variant, "default");
    if (!fallback.is_undefined()) out += std::string(20, ' ') + "// default: " + harmony::tojson(fallback);
    if (i + 1 < variants.size()) out += " | \n";
  }
  return out;
}

std::string object_type(const Value& spec) {
  const Value& properties = harmony::field(spec, "properties");
  if (!truthy(properties)) return "object";
  if (!properties.is_dict()) fault("tool parameter 'properties' must be an object");
  const Value& required = harmony::field(spec, "required");
  const Value required_names = truthy(required) ? required : Value::list();
  std::string out = "{\n";
  const auto& entries = properties.as_dict().entries();
  for (size_t i = 0; i < entries.size(); ++i) {
    const auto& [name, property] = entries[i];
    out += name;
    if (!contains(required_names, Value::string(name))) out += "?";
    out += ": \n" + std::string(16, ' ') + harmony::typescript_type(property);
    if (i + 1 < entries.size()) out += ", ";
  }
  return out + "}";
}

}  // namespace

namespace harmony {

const Value& field(const Value& object, std::string_view key) {
  static const Value kUndefined;
  if (!object.is_dict()) return kUndefined;
  const Value* found = object.as_dict().find(key);
  return found != nullptr ? *found : kUndefined;
}

std::string text(const Value& value, std::string_view what) {
  if (value.is_string()) return value.as_string();
  if (value.is_none() || value.is_undefined()) return "";
  fault(fmt::format("{} must be a string, got {}", what, type_name(value)));
}

std::string tojson(const Value& value) { return python_json_dumps(to_json(value), JsonDumpOptions{}); }

std::string typescript_type(const Value& spec) {
  const Value& type = field(spec, "type");
  if (is_text(type, "array")) return array_type(spec);
  if (type.is_list() && !type.as_list().empty()) {
    return type.as_list().size() > 1 ? join_text(type, " | ") : to_str(type.as_list().front());
  }
  if (truthy(field(spec, "oneOf"))) return one_of_type(spec);
  if (is_text(type, "string")) {
    const Value& choices = field(spec, "enum");
    if (truthy(choices)) {
      std::string quoted(1, '"');
      quoted += join_text(choices, "\" | \"");
      quoted.push_back('"');
      return quoted;
    }
    return truthy(field(spec, "nullable")) ? "string | null" : "string";
  }
  if (is_text(type, "number") || is_text(type, "integer")) return "number";
  if (is_text(type, "boolean")) return "boolean";
  if (is_text(type, "object")) return object_type(spec);
  return "any";
}

}  // namespace harmony

std::string render_harmony_tool_namespace(const Value& tools) {
  std::string out = "## functions\n\nnamespace functions {\n\n";
  for (const Value& entry : iterate(tools)) {
    const Value& wrapped = harmony::field(entry, "function");
    const Value& tool = wrapped.is_dict() ? wrapped : entry;
    const Value& description = harmony::field(tool, "description");
    if (!description.is_undefined() && !description.is_none())
      out += "// " + harmony::text(description, "tool description") + "\n";
    out += "type " + harmony::text(harmony::field(tool, "name"), "tool name") + " = ";
    const Value& parameters = harmony::field(tool, "parameters");
    const Value& properties = harmony::field(parameters, "properties");
    if (!truthy(parameters) || !truthy(properties)) {
      out += "() => any;\n\n";
      continue;
    }
    if (!properties.is_dict()) fault("tool parameter 'properties' must be an object");
    const Value& required = harmony::field(parameters, "required");
    const Value required_names = truthy(required) ? required : Value::list();
    out += "(_: {\n";
    for (const auto& [name, spec] : properties.as_dict().entries()) {
      const Value& param_description = harmony::field(spec, "description");
      if (truthy(param_description)) out += "// " + harmony::text(param_description, "parameter description") + "\n";
      out += name;
      if (!contains(required_names, Value::string(name))) out += "?";
      out += ": " + harmony::typescript_type(spec);
      const Value& fallback = harmony::field(spec, "default");
      if (!fallback.is_undefined()) {
        if (truthy(harmony::field(spec, "enum"))) {
          out += ", // default: " + harmony::text(fallback, "enum default");
        } else if (truthy(harmony::field(spec, "oneOf"))) {
          out += "// default: " + harmony::text(fallback, "oneOf default");
        } else {
          out += ", // default: " + harmony::tojson(fallback);
        }
      }
      out += ",\n";
    }
    out += "}) => any;\n\n";
  }
  return out + "} // namespace functions";
}

}  // namespace rs::chat
