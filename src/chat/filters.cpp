// Text and number filters (jinja2 semantics; tojson as transformers overrides it), and the filter registry.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cfenv>
#include <charconv>
#include <cmath>
#include <optional>
#include <unordered_map>

#include "chat/builtins.h"
#include "chat/python_format.h"
#include "chat/template_error.h"
#include "chat/utf8.h"

namespace rs::chat {

// Defined in filters_sequence.cpp.
FilterFn find_sequence_filter(std::string_view name);

namespace {

Value string_filter(const Value& input, const CallArgs& args) {
  ArgReader(args, "string", {});
  return Value::string(to_str(input));
}

Value case_filter(const Value& input, std::string_view method) {
  CallArgs no_args;
  return get_attribute(Value::string(to_str(input)), std::string(method)).as_function().call(no_args);
}

Value upper_filter(const Value& input, const CallArgs&) { return case_filter(input, "upper"); }
Value lower_filter(const Value& input, const CallArgs&) { return case_filter(input, "lower"); }
Value capitalize_filter(const Value& input, const CallArgs&) { return case_filter(input, "capitalize"); }

// jinja2 do_title: words begin after runs of '-', whitespace, '(', '{', '[', '<'.
Value title_filter(const Value& input, const CallArgs&) {
  std::string out;
  bool word_start = true;
  for (char32_t c : decode_utf8(to_str(input))) {
    const bool separator = c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || is_python_space(c);
    append_utf8(out, separator ? c : (word_start ? to_upper(c) : to_lower(c)));
    word_start = separator;
  }
  return Value::string(std::move(out));
}

Value trim_filter(const Value& input, const CallArgs& args) {
  const Value chars = ArgReader(args, "trim", {"chars"}).get_or(0, Value::none());
  const std::string chars_text = chars.is_none() ? "" : to_str(chars);
  return Value::string(python_strip(to_str(input), chars.is_none() ? nullptr : &chars_text, true, true));
}

Value replace_filter(const Value& input, const CallArgs& args) {
  const ArgReader read(args, "replace", {"old", "new", "count"});
  if (read.get(0) == nullptr || read.get(1) == nullptr) fault("replace filter needs old and new");
  CallArgs method_args;
  method_args.positional = {Value::string(to_str(*read.get(0))), Value::string(to_str(*read.get(1)))};
  const Value count = read.get_or(2, Value::none());
  if (!count.is_none()) method_args.positional.push_back(count);
  return get_attribute(Value::string(to_str(input)), "replace").as_function().call(method_args);
}

Value default_filter(const Value& input, const CallArgs& args) {
  const ArgReader read(args, "default", {"default_value", "boolean"});
  const bool boolean = truthy(read.get_or(1, Value::boolean(false)));
  if (input.is_undefined() || (boolean && !truthy(input))) return read.get_or(0, Value::string(""));
  return input;
}

Value length_filter(const Value& input, const CallArgs&) { return Value::integer(length(input)); }

Value safe_filter(const Value& input, const CallArgs&) {
  return input.is_string() ? input : Value::string(to_str(input));
}

Value escape_filter(const Value& input, const CallArgs&) {
  std::string out;
  for (char c : to_str(input)) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out.push_back(c);
    }
  }
  return Value::string(std::move(out));
}

// transformers' tojson: json.dumps(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False).
Value tojson_filter(const Value& input, const CallArgs& args) {
  const ArgReader read(args, "tojson", {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonDumpOptions options;
  options.ensure_ascii = truthy(read.get_or(0, Value::boolean(false)));
  const Value indent = read.get_or(1, Value::none());
  if (indent.is_string()) {
    options.indent = indent.as_string();
  } else if (indent.is_int()) {
    options.indent = std::string(static_cast<size_t>(std::max<int64_t>(indent.as_int(), 0)), ' ');
  } else if (!indent.is_none()) {
    fault("tojson indent must be an int or a string");
  }
  if (options.indent) options.item_separator.assign(1, ',');  // Python: indent implies ","
  const Value separators = read.get_or(2, Value::none());
  if (separators.is_list() && separators.as_list().size() == 2) {
    options.item_separator = to_str(separators.as_list()[0]);
    options.key_separator = to_str(separators.as_list()[1]);
  } else if (!separators.is_none()) {
    fault("tojson separators must be a pair of strings");
  }
  options.sort_keys = truthy(read.get_or(3, Value::boolean(false)));
  return Value::string(python_json_dumps(to_json(input), options));
}

std::optional<double> parse_float(const std::string& text) {
  const std::string trimmed = python_strip(text, nullptr, true, true);
  double value = 0;
  const char* begin = trimmed.data() + (!trimmed.empty() && trimmed[0] == '+' ? 1 : 0);
  const auto result = std::from_chars(begin, trimmed.data() + trimmed.size(), value);
  if (trimmed.empty() || result.ec != std::errc() || result.ptr != trimmed.data() + trimmed.size()) return std::nullopt;
  return value;
}

Value int_filter(const Value& input, const CallArgs& args) {
  const ArgReader read(args, "int", {"default", "base"});
  const int base = static_cast<int>(read.get_or(1, Value::integer(10)).as_int());
  if (input.is_float()) return Value::integer(static_cast<int64_t>(input.as_float()));
  if (input.is_numeric()) return Value::integer(input.as_int());
  if (input.is_string()) {
    std::string digits = python_strip(input.as_string(), nullptr, true, true);
    digits.erase(std::remove(digits.begin(), digits.end(), '_'), digits.end());
    const bool negative = !digits.empty() && digits[0] == '-';
    if (!digits.empty() && (digits[0] == '-' || digits[0] == '+')) digits.erase(0, 1);
    int radix = base;
    // Python int(text, base) accepts a matching 0x/0o/0b prefix; base 0 takes the base from the prefix.
    const char prefix = digits.size() > 2 && digits[0] == '0' ? static_cast<char>(std::tolower(digits[1])) : 0;
    const int prefix_radix = prefix == 'x' ? 16 : prefix == 'o' ? 8 : prefix == 'b' ? 2 : 0;
    if (prefix_radix != 0 && (base == 0 || base == prefix_radix)) {
      digits.erase(0, 2);
      radix = prefix_radix;
    } else if (base == 0) {
      radix = 10;
    }
    int64_t value = 0;
    const auto result = std::from_chars(digits.data(), digits.data() + digits.size(), value, radix);
    if (!digits.empty() && result.ec == std::errc() && result.ptr == digits.data() + digits.size()) {
      return Value::integer(negative ? -value : value);
    }
    if (const auto number = parse_float(input.as_string())) return Value::integer(static_cast<int64_t>(*number));
  }
  return read.get_or(0, Value::integer(0));
}

Value float_filter(const Value& input, const CallArgs& args) {
  const ArgReader read(args, "float", {"default"});
  if (input.is_numeric()) return Value::number(input.as_float());
  if (input.is_string()) {
    if (const auto number = parse_float(input.as_string())) return Value::number(*number);
  }
  return read.get_or(0, Value::number(0.0));
}

Value abs_filter(const Value& input, const CallArgs&) {
  if (input.is_float()) return Value::number(std::fabs(input.as_float()));
  if (input.is_numeric()) return Value::integer(std::llabs(input.as_int()));
  fault(fmt::format("bad operand type for abs(): '{}'", type_name(input)));
}

// Python round(): half to even at the requested precision; an int stays an int.
Value round_filter(const Value& input, const CallArgs& args) {
  const ArgReader read(args, "round", {"precision", "method"});
  const int64_t precision = read.get_or(0, Value::integer(0)).as_int();
  const std::string method = to_str(read.get_or(1, Value::string("common")));
  if (method != "common" && method != "ceil" && method != "floor") fault("method must be common, ceil or floor");
  if (!input.is_numeric()) fault(fmt::format("type {} doesn't define __round__ method", type_name(input)));
  if (method == "common" && !input.is_float()) return Value::integer(input.as_int());
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double scaled = input.as_float() * scale;
  double rounded = 0;
  if (method == "ceil") {
    rounded = std::ceil(scaled);
  } else if (method == "floor") {
    rounded = std::floor(scaled);
  } else {
    const int previous = std::fegetround();
    std::fesetround(FE_TONEAREST);
    rounded = std::nearbyint(scaled);
    std::fesetround(previous);
  }
  return Value::number(rounded / scale);
}

// jinja2 do_indent (the text gets a trailing newline before splitting, so a final newline is kept).
Value indent_filter(const Value& input, const CallArgs& args) {
  const ArgReader read(args, "indent", {"width", "first", "blank"});
  const Value width = read.get_or(0, Value::integer(4));
  const std::string indentation =
      width.is_string() ? width.as_string() : std::string(static_cast<size_t>(width.as_int()), ' ');
  const bool first = truthy(read.get_or(1, Value::boolean(false)));
  const bool blank = truthy(read.get_or(2, Value::boolean(false)));
  CallArgs no_args;
  const Value lines_value =
      get_attribute(Value::string(to_str(input) + "\n"), "splitlines").as_function().call(no_args);
  const List& lines = lines_value.as_list();
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i].as_string();
    if (i > 0) out += "\n" + ((blank || !line.empty()) ? indentation : "");
    out += line;
  }
  if (first) out = indentation + out;
  return Value::string(std::move(out));
}

Value center_filter(const Value& input, const CallArgs& args) {
  const int64_t width = ArgReader(args, "center", {"width"}).get_or(0, Value::integer(80)).as_int();
  const std::string text = to_str(input);
  const int64_t size = static_cast<int64_t>(utf8_length(text));
  if (width <= size) return Value::string(text);
  const int64_t margin = width - size;
  const int64_t left = margin / 2 + (margin & width & 1);
  return Value::string(std::string(left, ' ') + text + std::string(margin - left, ' '));
}

Value wordcount_filter(const Value& input, const CallArgs&) {
  int64_t words = 0;
  bool in_word = false;
  for (char32_t c : decode_utf8(to_str(input))) {
    const bool word_char = is_alpha(c) || is_digit(c) || c == '_' || (c >= 0x80 && !is_python_space(c));
    if (word_char && !in_word) ++words;
    in_word = word_char;
  }
  return Value::integer(words);
}

Value format_filter(const Value& input, const CallArgs& args) {
  if (!args.keyword.empty()) fault("format filter keyword arguments are not supported");
  return binary_op("%", Value::string(to_str(input)), Value::list(args.positional));
}

}  // namespace

FilterFn find_filter(std::string_view name) {
  static const std::unordered_map<std::string_view, FilterFn> kFilters = {
      {"abs", abs_filter},
      {"capitalize", capitalize_filter},
      {"center", center_filter},
      {"count", length_filter},
      {"d", default_filter},
      {"default", default_filter},
      {"e", escape_filter},
      {"escape", escape_filter},
      {"float", float_filter},
      {"format", format_filter},
      {"indent", indent_filter},
      {"int", int_filter},
      {"length", length_filter},
      {"lower", lower_filter},
      {"replace", replace_filter},
      {"round", round_filter},
      {"safe", safe_filter},
      {"string", string_filter},
      {"title", title_filter},
      {"tojson", tojson_filter},
      {"trim", trim_filter},
      {"upper", upper_filter},
      {"wordcount", wordcount_filter},
  };
  const auto found = kFilters.find(name);
  return found != kFilters.end() ? found->second : find_sequence_filter(name);
}

}  // namespace rs::chat
