// Python operators, `in`, comparisons, item lookup and slicing, as jinja2 evaluates them.
#include <fmt/format.h>

#include <cmath>

#include "chat/builtins.h"
#include "chat/python_format.h"
#include "chat/template_error.h"
#include "chat/utf8.h"

namespace rs::chat {
namespace {

[[noreturn]] void unsupported(std::string_view op, const Value& lhs, const Value& rhs) {
  if (op == "+" && (lhs.is_string() || lhs.is_list())) {
    fault(fmt::format("can only concatenate {} (not \"{}\") to {}", type_name(lhs), type_name(rhs), type_name(lhs)));
  }
  fault(fmt::format("unsupported operand type(s) for {}: '{}' and '{}'", op, type_name(lhs), type_name(rhs)));
}

Value repeat(const Value& sequence, int64_t times) {
  if (sequence.is_string()) {
    std::string out;
    for (int64_t i = 0; i < times; ++i) out += sequence.as_string();
    return Value::string(std::move(out));
  }
  List out;
  for (int64_t i = 0; i < times; ++i) out.insert(out.end(), sequence.as_list().begin(), sequence.as_list().end());
  return Value::list(std::move(out));
}

// Python ints are unbounded; ours are 64-bit, and overflow is an error rather than undefined behaviour.
// op: '+', '-' or '*'.
int64_t checked(char op, int64_t a, int64_t b) {
  int64_t result = 0;
  const bool overflowed = op == '+'   ? __builtin_add_overflow(a, b, &result)
                          : op == '-' ? __builtin_sub_overflow(a, b, &result)
                                      : __builtin_mul_overflow(a, b, &result);
  if (overflowed) fault("integer overflow: the template interpreter's integers are 64-bit");
  return result;
}

int64_t floor_div(int64_t a, int64_t b) {
  const int64_t quotient = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? quotient - 1 : quotient;
}

// printf-style `format % args` for the conversions templates use: %s %r %d %i %f %x %%.
Value percent_format(const std::string& format, const Value& args) {
  const List values = args.is_list() ? args.as_list() : List{args};
  size_t next = 0;
  std::string out;
  for (size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%') {
      out.push_back(format[i]);
      continue;
    }
    size_t j = i + 1;
    int precision = -1;
    if (j < format.size() && format[j] == '.') {
      precision = 0;
      for (++j; j < format.size() && format[j] >= '0' && format[j] <= '9'; ++j)
        precision = precision * 10 + (format[j] - '0');
    }
    if (j >= format.size()) fault("incomplete format");
    const char conversion = format[j];
    i = j;
    if (conversion == '%') {
      out.push_back('%');
      continue;
    }
    if (next >= values.size()) fault("not enough arguments for format string");
    const Value& value = values[next++];
    switch (conversion) {
      case 's': out += to_str(value); break;
      case 'r': out += repr(value); break;
      case 'd':
      case 'i':
        if (!value.is_numeric())
          fault(fmt::format("%{} format: a real number is required, not {}", conversion, type_name(value)));
        out += std::to_string(value.is_float() ? static_cast<int64_t>(value.as_float()) : value.as_int());
        break;
      case 'f':
        if (!value.is_numeric()) fault(fmt::format("must be real number, not {}", type_name(value)));
        out += fmt::format("{:.{}f}", value.as_float(), precision < 0 ? 6 : precision);
        break;
      case 'x':
        if (!value.is_int() && !value.is_bool())
          fault(fmt::format("%x format: an integer is required, not {}", type_name(value)));
        out += fmt::format("{:x}", value.as_int());
        break;
      default: fault(fmt::format("unsupported format character '{}'", conversion));
    }
  }
  if (next < values.size()) fault("not all arguments converted during string formatting");
  return Value::string(std::move(out));
}

// Python slice.indices(): clamps start/stop for a sequence of `size` items.
void adjust_slice(const Value& start_value, const Value& stop_value, const Value& step_value, int64_t size,
                  int64_t* start, int64_t* stop, int64_t* step) {
  auto as_index = [](const Value& value) {
    if (!value.is_int() && !value.is_bool())
      fault("slice indices must be integers or None or have an __index__ method");
    return value.as_int();
  };
  const auto absent = [](const Value& value) { return value.is_undefined() || value.is_none(); };
  *step = absent(step_value) ? 1 : as_index(step_value);
  if (*step == 0) fault("slice step cannot be zero");
  auto clamp = [&](const Value& value, int64_t fallback) {
    if (absent(value)) return fallback;
    int64_t index = as_index(value);
    if (index < 0) {
      index += size;
      if (index < 0) index = *step < 0 ? -1 : 0;
    } else if (index >= size) {
      index = *step < 0 ? size - 1 : size;
    }
    return index;
  };
  *start = clamp(start_value, *step < 0 ? size - 1 : 0);
  *stop = clamp(stop_value, *step < 0 ? -1 : size);
}

}  // namespace

Value binary_op(std::string_view op, const Value& lhs, const Value& rhs) {
  if (lhs.is_undefined()) fail_undefined(lhs);
  if (rhs.is_undefined()) fail_undefined(rhs);
  const bool numeric = lhs.is_numeric() && rhs.is_numeric();
  const bool integral = numeric && !lhs.is_float() && !rhs.is_float();
  if (op == "+") {
    if (integral) return Value::integer(checked('+', lhs.as_int(), rhs.as_int()));
    if (numeric) return Value::number(lhs.as_float() + rhs.as_float());
    if (lhs.is_string() && rhs.is_string()) return Value::string(lhs.as_string() + rhs.as_string());
    if (lhs.is_list() && rhs.is_list()) {
      List joined = lhs.as_list();
      joined.insert(joined.end(), rhs.as_list().begin(), rhs.as_list().end());
      return Value::list(std::move(joined));
    }
  } else if (op == "-") {
    if (integral) return Value::integer(checked('-', lhs.as_int(), rhs.as_int()));
    if (numeric) return Value::number(lhs.as_float() - rhs.as_float());
  } else if (op == "*") {
    if (integral) return Value::integer(checked('*', lhs.as_int(), rhs.as_int()));
    if (numeric) return Value::number(lhs.as_float() * rhs.as_float());
    const bool rhs_count = rhs.is_int() || rhs.is_bool();
    const bool lhs_count = lhs.is_int() || lhs.is_bool();
    if ((lhs.is_string() || lhs.is_list()) && rhs_count) return repeat(lhs, rhs.as_int());
    if ((rhs.is_string() || rhs.is_list()) && lhs_count) return repeat(rhs, lhs.as_int());
  } else if (op == "/") {
    if (numeric) {
      if (rhs.as_float() == 0.0) fault("division by zero");
      return Value::number(lhs.as_float() / rhs.as_float());
    }
  } else if (op == "//") {
    if (integral) {
      if (rhs.as_int() == 0) fault("integer division or modulo by zero");
      return Value::integer(floor_div(lhs.as_int(), rhs.as_int()));
    }
    if (numeric) {
      if (rhs.as_float() == 0.0) fault("float floor division by zero");
      return Value::number(std::floor(lhs.as_float() / rhs.as_float()));
    }
  } else if (op == "%") {
    if (lhs.is_string()) return percent_format(lhs.as_string(), rhs);
    if (integral) {
      if (rhs.as_int() == 0) fault("integer division or modulo by zero");
      return Value::integer(lhs.as_int() - floor_div(lhs.as_int(), rhs.as_int()) * rhs.as_int());
    }
    if (numeric) {
      if (rhs.as_float() == 0.0) fault("float modulo");
      double result = std::fmod(lhs.as_float(), rhs.as_float());
      if (result != 0 && ((result < 0) != (rhs.as_float() < 0))) result += rhs.as_float();
      return Value::number(result);
    }
  } else if (op == "**") {
    if (integral && rhs.as_int() >= 0) {
      const int64_t base = lhs.as_int();
      const int64_t exponent = rhs.as_int();
      if (base == 0 || base == 1) return Value::integer(exponent == 0 ? 1 : base);
      if (base == -1) return Value::integer(exponent % 2 == 0 ? 1 : -1);
      int64_t result = 1;  // |base| >= 2 overflows within 63 steps
      for (int64_t i = 0; i < exponent; ++i) result = checked('*', result, base);
      return Value::integer(result);
    }
    if (numeric) return Value::number(std::pow(lhs.as_float(), rhs.as_float()));
  }
  unsupported(op, lhs, rhs);
}

Value negate(const Value& operand) {
  if (operand.is_undefined()) fail_undefined(operand);
  if (operand.is_float()) return Value::number(-operand.as_float());
  if (operand.is_numeric()) return Value::integer(-operand.as_int());
  fault(fmt::format("bad operand type for unary -: '{}'", type_name(operand)));
}

bool contains(const Value& haystack, const Value& needle) {
  switch (haystack.kind()) {
    case Value::Kind::kUndefined: return false;
    case Value::Kind::kString:
      if (!needle.is_string()) {
        fault(fmt::format("'in <string>' requires string as left operand, not {}", type_name(needle)));
      }
      return haystack.as_string().find(needle.as_string()) != std::string::npos;
    case Value::Kind::kList:
      for (const auto& item : haystack.as_list()) {
        if (equals(item, needle)) return true;
      }
      return false;
    case Value::Kind::kDict:
      if (haystack.is_namespace()) break;
      return needle.is_string() && haystack.as_dict().find(needle.as_string()) != nullptr;
    default: break;
  }
  fault(fmt::format("argument of type '{}' is not iterable", type_name(haystack)));
}

bool compare_op(std::string_view op, const Value& lhs, const Value& rhs) {
  if (op == "==") return equals(lhs, rhs);
  if (op == "!=") return !equals(lhs, rhs);
  if (op == "in") return contains(rhs, lhs);
  if (op == "notin") return !contains(rhs, lhs);
  const int order = compare(lhs, rhs, op);
  if (op == "<") return order < 0;
  if (op == "<=") return order <= 0;
  if (op == ">") return order > 0;
  return order >= 0;
}

Value get_item(const Value& object, const Value& key) {
  const bool integer_key = key.is_int() || key.is_bool();
  if (object.is_list() && integer_key) {
    const List& items = object.as_list();
    int64_t index = key.as_int();
    if (index < 0) index += static_cast<int64_t>(items.size());
    if (index >= 0 && index < static_cast<int64_t>(items.size())) return items[index];
    return Value::undefined(fmt::format("list object has no element {}", key.as_int()));
  }
  if (object.is_string() && integer_key) {
    const std::u32string chars = decode_utf8(object.as_string());
    int64_t index = key.as_int();
    if (index < 0) index += static_cast<int64_t>(chars.size());
    if (index >= 0 && index < static_cast<int64_t>(chars.size())) {
      std::string one;
      append_utf8(one, chars[index]);
      return Value::string(std::move(one));
    }
    return Value::undefined(fmt::format("str object has no element {}", key.as_int()));
  }
  if (object.is_dict() && !object.is_namespace() && key.is_string()) {
    if (const Value* found = object.as_dict().find(key.as_string())) return *found;
  }
  if (key.is_string()) return get_attribute(object, key.as_string());
  return Value::undefined(fmt::format("{} object has no element {}", type_name(object), to_str(key)));
}

Value slice_value(const Value& object, const Value& start_value, const Value& stop_value, const Value& step_value) {
  if (object.is_undefined()) fail_undefined(object);
  if (!object.is_list() && !object.is_string())
    fault(fmt::format("'{}' object is not subscriptable", type_name(object)));
  const std::u32string chars = object.is_string() ? decode_utf8(object.as_string()) : std::u32string();
  const int64_t size =
      object.is_string() ? static_cast<int64_t>(chars.size()) : static_cast<int64_t>(object.as_list().size());
  int64_t start = 0;
  int64_t stop = 0;
  int64_t step = 1;
  adjust_slice(start_value, stop_value, step_value, size, &start, &stop, &step);
  if (object.is_string()) {
    std::string out;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) append_utf8(out, chars[i]);
    return Value::string(std::move(out));
  }
  List out;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) out.push_back(object.as_list()[i]);
  return Value::list(std::move(out));
}

}  // namespace rs::chat
