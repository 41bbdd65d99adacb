// Attribute lookup (jinja2 environment.getattr under ImmutableSandboxedEnvironment) and the Python
// methods of str, dict and list that templates call.
#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "chat/builtins.h"
#include "chat/template_error.h"
#include "chat/utf8.h"

namespace rs::chat {
namespace {

// Methods that mutate a list or dict: the immutable sandbox refuses them.
constexpr std::array<std::string_view, 14> kUnsafeMethods = {"append",  "extend", "insert",  "pop",        "remove",
                                                             "reverse", "sort",   "clear",   "popitem",    "setdefault",
                                                             "update",  "add",    "discard", "__setitem__"};

const std::string& expect_string(const Value& value, std::string_view what) {
  if (!value.is_string()) fault(fmt::format("{} must be str, not {}", what, type_name(value)));
  return value.as_string();
}

int64_t code_point_index(const std::string& text, size_t byte_offset) {
  return static_cast<int64_t>(utf8_length(std::string_view(text).substr(0, byte_offset)));
}

List split(const std::string& text, const Value* separator, int64_t max_splits, bool from_right) {
  List parts;
  if (separator == nullptr || separator->is_none()) {
    std::u32string chars = decode_utf8(text);
    if (from_right) std::reverse(chars.begin(), chars.end());
    size_t i = 0;
    while (true) {
      while (i < chars.size() && is_python_space(chars[i])) ++i;
      if (i >= chars.size()) break;
      size_t end = i;
      if (max_splits >= 0 && static_cast<int64_t>(parts.size()) == max_splits) {
        end = chars.size();
        while (end > i && is_python_space(chars[end - 1])) --end;
      } else {
        while (end < chars.size() && !is_python_space(chars[end])) ++end;
      }
      std::u32string piece = chars.substr(i, end - i);
      if (from_right) std::reverse(piece.begin(), piece.end());
      parts.push_back(Value::string(encode_utf8(piece)));
      i = end;
    }
    if (from_right) std::reverse(parts.begin(), parts.end());
    return parts;
  }
  const std::string& sep = expect_string(*separator, "separator");
  if (sep.empty()) fault("empty separator");
  if (!from_right) {
    size_t start = 0;
    for (size_t at = text.find(sep); at != std::string::npos; at = text.find(sep, start)) {
      if (max_splits >= 0 && static_cast<int64_t>(parts.size()) == max_splits) break;
      parts.push_back(Value::string(text.substr(start, at - start)));
      start = at + sep.size();
    }
    parts.push_back(Value::string(text.substr(start)));
    return parts;
  }
  size_t end = text.size();
  while (max_splits < 0 || static_cast<int64_t>(parts.size()) < max_splits) {
    if (end < sep.size()) break;
    const size_t at = text.rfind(sep, end - sep.size());
    if (at == std::string::npos) break;
    parts.push_back(Value::string(text.substr(at + sep.size(), end - at - sep.size())));
    end = at;
  }
  parts.push_back(Value::string(text.substr(0, end)));
  std::reverse(parts.begin(), parts.end());
  return parts;
}

bool matches_affix(const std::string& text, const Value& affix, bool prefix) {
  auto one = [&](const Value& candidate) {
    const std::string& value = expect_string(candidate, prefix ? "startswith first arg" : "endswith first arg");
    if (value.size() > text.size()) return false;
    return prefix ? text.compare(0, value.size(), value) == 0
                  : text.compare(text.size() - value.size(), value.size(), value) == 0;
  };
  if (affix.is_list()) return std::any_of(affix.as_list().begin(), affix.as_list().end(), one);
  return one(affix);
}

std::string map_case(const std::string& text, std::string_view mode) {
  std::string out;
  bool previous_cased = false;
  bool first = true;
  for (char32_t c : decode_utf8(text)) {
    char32_t mapped = c;
    if (mode == "upper") {
      if (c == 0xDF) {  // Python: 'ß'.upper() == 'SS'
        out += "SS";
        continue;
      }
      mapped = to_upper(c);
    } else if (mode == "lower") {
      mapped = to_lower(c);
    } else if (mode == "title") {
      mapped = previous_cased ? to_lower(c) : to_upper(c);
      previous_cased = is_alpha(c);
    } else {  // capitalize
      mapped = first ? to_upper(c) : to_lower(c);
    }
    first = false;
    append_utf8(out, mapped);
  }
  return out;
}

// str.format with {} / {0} / {name} fields (no format specs).
std::string format_string(const std::string& format, const CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < format.size(); ++i) {
    const char c = format[i];
    if ((c == '{' || c == '}') && i + 1 < format.size() && format[i + 1] == c) {
      out.push_back(c);
      ++i;
      continue;
    }
    if (c != '{') {
      if (c == '}') fault("Single '}' encountered in format string");
      out.push_back(c);
      continue;
    }
    const size_t close = format.find('}', i);
    if (close == std::string::npos) fault("Single '{' encountered in format string");
    const std::string field = format.substr(i + 1, close - i - 1);
    if (field.find_first_of(":!.[") != std::string::npos) fault("format specs are not supported in str.format");
    const Value* value = nullptr;
    if (field.empty() || std::all_of(field.begin(), field.end(), [](char d) { return d >= '0' && d <= '9'; })) {
      const size_t index = field.empty() ? auto_index++ : std::stoul(field);
      if (index >= args.positional.size()) fault(fmt::format("Replacement index {} out of range", index));
      value = &args.positional[index];
    } else {
      for (const auto& [name, argument] : args.keyword) {
        if (name == field) value = &argument;
      }
      if (value == nullptr) fault(fmt::format("'{}'", field));
    }
    out += to_str(*value);
    i = close;
  }
  return out;
}

Value call_string_method(const std::string& text, const std::string& name, const CallArgs& args) {
  auto reader = [&](std::initializer_list<std::string_view> params) { return ArgReader(args, name, params); };
  if (name == "startswith" || name == "endswith") {
    const ArgReader read = reader({"prefix"});
    if (read.get(0) == nullptr) fault(fmt::format("{}() takes at least 1 argument (0 given)", name));
    return Value::boolean(matches_affix(text, *read.get(0), name == "startswith"));
  }
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const Value chars = reader({"chars"}).get_or(0, Value::none());
    const std::string* set = chars.is_none() ? nullptr : &expect_string(chars, "strip arg");
    return Value::string(python_strip(text, set, name != "rstrip", name != "lstrip"));
  }
  if (name == "split" || name == "rsplit") {
    const ArgReader read = reader({"sep", "maxsplit"});
    const Value max_splits = read.get_or(1, Value::integer(-1));
    return Value::list(split(text, read.get(0), max_splits.as_int(), name == "rsplit"));
  }
  if (name == "splitlines") {
    List lines;
    std::u32string line;
    const std::u32string chars = decode_utf8(text);
    for (size_t i = 0; i < chars.size(); ++i) {
      const char32_t c = chars[i];
      if (c == '\n' || c == '\r' || c == '\v' || c == '\f' || (c >= 0x1C && c <= 0x1E) || c == 0x85 || c == 0x2028 ||
          c == 0x2029) {
        if (c == '\r' && i + 1 < chars.size() && chars[i + 1] == '\n') ++i;
        lines.push_back(Value::string(encode_utf8(line)));
        line.clear();
      } else {
        line.push_back(c);
      }
    }
    if (!line.empty()) lines.push_back(Value::string(encode_utf8(line)));
    return Value::list(std::move(lines));
  }
  if (name == "replace") {
    const ArgReader read = reader({"old", "new", "count"});
    if (read.get(0) == nullptr || read.get(1) == nullptr) fault("replace() takes at least 2 arguments");
    const std::string& from = expect_string(*read.get(0), "replace() argument 1");
    const std::string& to = expect_string(*read.get(1), "replace() argument 2");
    int64_t remaining = read.get_or(2, Value::integer(-1)).as_int();
    std::string out;
    size_t start = 0;
    if (from.empty()) {
      for (char32_t c : decode_utf8(text)) {
        if (remaining != 0) out += to, --remaining;
        append_utf8(out, c);
      }
      if (remaining != 0) out += to;
      return Value::string(std::move(out));
    }
    for (size_t at = text.find(from); at != std::string::npos && remaining != 0;
         at = text.find(from, start), --remaining) {
      out += text.substr(start, at - start) + to;
      start = at + from.size();
    }
    return Value::string(out + text.substr(start));
  }
  if (name == "upper" || name == "lower" || name == "title" || name == "capitalize") {
    return Value::string(map_case(text, name));
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "count") {
    const ArgReader read = reader({"sub"});
    if (read.get(0) == nullptr) fault(fmt::format("{}() takes at least 1 argument (0 given)", name));
    const std::string& sub = expect_string(*read.get(0), "must be str");
    if (name == "count") {
      if (sub.empty()) return Value::integer(static_cast<int64_t>(utf8_length(text)) + 1);
      int64_t count = 0;
      for (size_t at = text.find(sub); at != std::string::npos; at = text.find(sub, at + sub.size())) ++count;
      return Value::integer(count);
    }
    const size_t at = name == "rfind" ? text.rfind(sub) : text.find(sub);
    if (at == std::string::npos) {
      if (name == "index") fault("substring not found");
      return Value::integer(-1);
    }
    return Value::integer(code_point_index(text, at));
  }
  if (name == "join") {
    const ArgReader read = reader({"iterable"});
    if (read.get(0) == nullptr) fault("join() takes exactly one argument (0 given)");
    std::string out;
    size_t index = 0;
    for (const Value& item : iterate(*read.get(0))) {
      if (!item.is_string())
        fault(fmt::format("sequence item {}: expected str instance, {} found", index, type_name(item)));
      if (index++ > 0) out += text;
      out += item.as_string();
    }
    return Value::string(std::move(out));
  }
  if (name == "format") return Value::string(format_string(text, args));
  if (name == "isdigit" || name == "isalpha" || name == "isalnum" || name == "isspace" || name == "isupper" ||
      name == "islower") {
    const std::u32string chars = decode_utf8(text);
    if (chars.empty()) return Value::boolean(false);
    if (name == "isupper" || name == "islower") {
      bool cased = false;
      for (char32_t c : chars) {
        if (!is_alpha(c)) continue;
        cased = true;
        if ((name == "isupper") != (to_upper(c) == c)) return Value::boolean(false);
      }
      return Value::boolean(cased);
    }
    return Value::boolean(std::all_of(chars.begin(), chars.end(), [&](char32_t c) {
      if (name == "isdigit") return is_digit(c);
      if (name == "isalpha") return is_alpha(c);
      if (name == "isalnum") return is_alpha(c) || is_digit(c);
      return is_python_space(c);
    }));
  }
  fault(fmt::format("'str object' has no attribute '{}'", name));
}

constexpr std::array<std::string_view, 24> kStringMethods = {
    "startswith", "endswith", "strip",  "lstrip",  "rstrip",     "split",   "rsplit",  "splitlines",
    "replace",    "upper",    "lower",  "title",   "capitalize", "find",    "rfind",   "index",
    "count",      "join",     "format", "isdigit", "isalpha",    "isalnum", "isspace", "isupper"};

bool is_string_method(std::string_view name) {
  return name == "islower" || std::find(kStringMethods.begin(), kStringMethods.end(), name) != kStringMethods.end();
}

Value dict_method(const Value& object, const std::string& name) {
  if (name == "items" || name == "keys" || name == "values") {
    return Value::function(name, [object, name](CallArgs&) {
      List out;
      for (const auto& [key, item] : object.as_dict().entries()) {
        if (name == "items") {
          out.push_back(Value::tuple({Value::string(key), item}));
        } else {
          out.push_back(name == "keys" ? Value::string(key) : item);
        }
      }
      return Value::list(std::move(out));
    });
  }
  if (name == "get") {
    return Value::function(name, [object](CallArgs& args) {
      const ArgReader read(args, "get", {"key", "default"});
      if (read.get(0) == nullptr) fault("get expected at least 1 argument, got 0");
      if (read.get(0)->is_string()) {
        if (const Value* found = object.as_dict().find(read.get(0)->as_string())) return *found;
      }
      return read.get_or(1, Value::none());
    });
  }
  if (name == "copy") {
    return Value::function(name, [object](CallArgs&) { return Value::dict(object.as_dict()); });
  }
  return Value();
}

}  // namespace

std::string python_strip(const std::string& text, const std::string* chars, bool left, bool right) {
  const std::u32string code_points = decode_utf8(text);
  const std::u32string strip_set = chars == nullptr ? std::u32string() : decode_utf8(*chars);
  auto strip = [&](char32_t c) {
    return chars == nullptr ? is_python_space(c) : strip_set.find(c) != std::u32string::npos;
  };
  size_t begin = 0;
  size_t end = code_points.size();
  if (left) {
    while (begin < end && strip(code_points[begin])) ++begin;
  }
  if (right) {
    while (end > begin && strip(code_points[end - 1])) --end;
  }
  if (chars == nullptr && is_ascii(text)) return text.substr(begin, end - begin);
  return encode_utf8(std::u32string_view(code_points).substr(begin, end - begin));
}

Value get_attribute(const Value& object, const std::string& name) {
  const bool unsafe = std::find(kUnsafeMethods.begin(), kUnsafeMethods.end(), name) != kUnsafeMethods.end();
  switch (object.kind()) {
    case Value::Kind::kString:
      if (is_string_method(name)) {
        return Value::function(
            name, [text = object.as_string(), name](CallArgs& args) { return call_string_method(text, name, args); });
      }
      break;
    case Value::Kind::kDict: {
      if (object.is_namespace()) {
        if (const Value* found = object.as_dict().find(name)) return *found;
        return Value::undefined(fmt::format("'Namespace' object has no attribute '{}'", name));
      }
      if (unsafe) return Value::undefined(fmt::format("access to attribute '{}' of 'dict' object is unsafe.", name));
      Value method = dict_method(object, name);
      if (!method.is_undefined()) return method;
      if (const Value* found = object.as_dict().find(name)) return *found;
      break;
    }
    case Value::Kind::kList:
      if (unsafe) return Value::undefined(fmt::format("access to attribute '{}' of 'list' object is unsafe.", name));
      if (name == "index" || name == "count") {
        return Value::function(name, [object, name](CallArgs& args) {
          const ArgReader read(args, name, {"value"});
          if (read.get(0) == nullptr) fault(fmt::format("{}() takes exactly one argument (0 given)", name));
          int64_t count = 0;
          const List& items = object.as_list();
          for (size_t i = 0; i < items.size(); ++i) {
            if (!equals(items[i], *read.get(0))) continue;
            if (name == "index") return Value::integer(static_cast<int64_t>(i));
            ++count;
          }
          if (name == "index") fault(fmt::format("{} is not in list", repr(*read.get(0))));
          return Value::integer(count);
        });
      }
      break;
    case Value::Kind::kNone: return Value::undefined(fmt::format("'None' has no attribute '{}'", name));
    default: break;
  }
  return Value::undefined(fmt::format("'{} object' has no attribute '{}'", type_name(object), name));
}

}  // namespace rs::chat
