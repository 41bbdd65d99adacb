// Python float repr, str repr and json.dumps, reproduced byte for byte.
#include "chat/python_format.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <vector>

#include "chat/utf8.h"

namespace rs::chat {
namespace {

void append_hex4(std::string& out, unsigned value) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += "\\u";
  for (int shift = 12; shift >= 0; shift -= 4) out.push_back(kHex[(value >> shift) & 0xF]);
}

void append_json_string(std::string& out, std::string_view text, bool ensure_ascii) {
  out.push_back('"');
  for (char32_t c : decode_utf8(text)) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          append_hex4(out, c);
        } else if (ensure_ascii && c >= 0x7F) {
          if (c >= 0x10000) {
            const char32_t v = c - 0x10000;
            append_hex4(out, 0xD800 + (v >> 10));
            append_hex4(out, 0xDC00 + (v & 0x3FF));
          } else {
            append_hex4(out, c);
          }
        } else {
          append_utf8(out, c);
        }
    }
  }
  out.push_back('"');
}

void dump(std::string& out, const nlohmann::ordered_json& json, const JsonDumpOptions& options, int depth) {
  const bool pretty = options.indent.has_value();
  auto newline = [&](int level) {
    out.push_back('\n');
    for (int i = 0; i < level; ++i) out += *options.indent;
  };
  switch (json.type()) {
    case nlohmann::ordered_json::value_t::null: out += "null"; return;
    case nlohmann::ordered_json::value_t::boolean: out += json.get<bool>() ? "true" : "false"; return;
    case nlohmann::ordered_json::value_t::number_integer: out += std::to_string(json.get<int64_t>()); return;
    case nlohmann::ordered_json::value_t::number_unsigned: out += std::to_string(json.get<uint64_t>()); return;
    case nlohmann::ordered_json::value_t::number_float: {
      const double value = json.get<double>();
      if (std::isnan(value)) {
        out += "NaN";
      } else if (std::isinf(value)) {
        out += value > 0 ? "Infinity" : "-Infinity";
      } else {
        out += python_float_repr(value);
      }
      return;
    }
    case nlohmann::ordered_json::value_t::string:
      append_json_string(out, json.get_ref<const std::string&>(), options.ensure_ascii);
      return;
    case nlohmann::ordered_json::value_t::array: {
      if (json.empty()) {
        out += "[]";
        return;
      }
      out.push_back('[');
      bool first = true;
      for (const auto& item : json) {
        if (!first) out += options.item_separator;
        first = false;
        if (pretty) newline(depth + 1);
        dump(out, item, options, depth + 1);
      }
      if (pretty) newline(depth);
      out.push_back(']');
      return;
    }
    case nlohmann::ordered_json::value_t::object: {
      if (json.empty()) {
        out += "{}";
        return;
      }
      std::vector<std::pair<const std::string*, const nlohmann::ordered_json*>> items;
      for (auto it = json.begin(); it != json.end(); ++it) items.emplace_back(&it.key(), &it.value());
      if (options.sort_keys) {
        std::stable_sort(items.begin(), items.end(), [](const auto& a, const auto& b) { return *a.first < *b.first; });
      }
      out.push_back('{');
      bool first = true;
      for (const auto& [key, item] : items) {
        if (!first) out += options.item_separator;
        first = false;
        if (pretty) newline(depth + 1);
        append_json_string(out, *key, options.ensure_ascii);
        out += options.key_separator;
        dump(out, *item, options, depth + 1);
      }
      if (pretty) newline(depth);
      out.push_back('}');
      return;
    }
    default: out += "null"; return;
  }
}

}  // namespace

std::string python_float_repr(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  if (value == 0) return std::signbit(value) ? "-0.0" : "0.0";
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value, std::chars_format::scientific);
  const std::string_view text(buffer, result.ptr - buffer);
  // text = [-]d[.ddd]e[+-]xx
  const bool negative = text.front() == '-';
  const size_t e_pos = text.find('e');
  std::string digits;
  for (char c : text.substr(negative ? 1 : 0, e_pos - (negative ? 1 : 0))) {
    if (c != '.') digits.push_back(c);
  }
  const int exponent = std::stoi(std::string(text.substr(e_pos + 1)));
  const int decimal_point = exponent + 1;  // digits before the point
  std::string out = negative ? "-" : "";
  if (decimal_point <= -4 || decimal_point > 16) {
    out.push_back(digits.front());
    if (digits.size() > 1) {
      out.push_back('.');
      out.append(digits, 1);
    }
    out += exponent < 0 ? "e-" : "e+";
    const int magnitude = std::abs(exponent);
    if (magnitude < 10) out.push_back('0');
    out += std::to_string(magnitude);
  } else if (decimal_point <= 0) {
    out += "0.";
    out.append(static_cast<size_t>(-decimal_point), '0');
    out += digits;
  } else if (static_cast<size_t>(decimal_point) >= digits.size()) {
    out += digits;
    out.append(decimal_point - digits.size(), '0');
    out += ".0";
  } else {
    out.append(digits, 0, decimal_point);
    out.push_back('.');
    out.append(digits, decimal_point);
  }
  return out;
}

std::string python_string_repr(std::string_view text) {
  const bool has_single = text.find('\'') != std::string_view::npos;
  const bool has_double = text.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (char32_t c : decode_utf8(text)) {
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || (c >= 0x7F && c <= 0xA0) || c == 0xAD) {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 0xF]);
    } else if (c == 0x2028 || c == 0x2029) {
      out += c == 0x2028 ? "\\u2028" : "\\u2029";
    } else {
      append_utf8(out, c);
    }
  }
  out.push_back(quote);
  return out;
}

std::string python_json_dumps(const nlohmann::ordered_json& json, const JsonDumpOptions& options) {
  std::string out;
  dump(out, json, options, 0);
  return out;
}

}  // namespace rs::chat
