// Jinja tests (`x is name(args)`), with jinja2's definitions (a bool is a number but not an integer, ...).
#include <fmt/format.h>

#include <unordered_map>

#include "chat/builtins.h"
#include "chat/template_error.h"
#include "chat/utf8.h"

namespace rs::chat {
namespace {

const Value& argument(const CallArgs& args, std::string_view test) {
  if (args.positional.empty()) fault(fmt::format("test '{}' needs an argument", test));
  return args.positional.front();
}

int64_t integer_of(const Value& value, std::string_view test) {
  if (value.is_undefined()) fail_undefined(value);
  if (!value.is_int() && !value.is_bool())
    fault(fmt::format("test '{}' needs an integer, got {}", test, type_name(value)));
  return value.as_int();
}

bool is_defined(const Value& value, const CallArgs&) { return !value.is_undefined(); }
bool is_undefined(const Value& value, const CallArgs&) { return value.is_undefined(); }
bool is_none(const Value& value, const CallArgs&) { return value.is_none(); }
bool is_boolean(const Value& value, const CallArgs&) { return value.is_bool(); }
bool is_true(const Value& value, const CallArgs&) { return value.is_bool() && value.as_bool(); }
bool is_false(const Value& value, const CallArgs&) { return value.is_bool() && !value.as_bool(); }
bool is_number(const Value& value, const CallArgs&) { return value.is_numeric(); }
bool is_integer(const Value& value, const CallArgs&) { return value.is_int(); }
bool is_float(const Value& value, const CallArgs&) { return value.is_float(); }
bool is_string(const Value& value, const CallArgs&) { return value.is_string(); }
bool is_mapping(const Value& value, const CallArgs&) { return value.is_dict() && !value.is_namespace(); }
bool is_callable(const Value& value, const CallArgs&) { return value.is_function(); }
bool is_iterable(const Value& value, const CallArgs&) {
  return value.is_undefined() || value.is_string() || value.is_list() || (value.is_dict() && !value.is_namespace());
}
bool is_sequence(const Value& value, const CallArgs& args) { return is_iterable(value, args); }
bool is_odd(const Value& value, const CallArgs&) { return integer_of(value, "odd") % 2 != 0; }
bool is_even(const Value& value, const CallArgs&) { return integer_of(value, "even") % 2 == 0; }
bool is_divisibleby(const Value& value, const CallArgs& args) {
  const int64_t divisor = integer_of(argument(args, "divisibleby"), "divisibleby");
  if (divisor == 0) fault("integer division or modulo by zero");
  return integer_of(value, "divisibleby") % divisor == 0;
}
bool is_eq(const Value& value, const CallArgs& args) { return equals(value, argument(args, "eq")); }
bool is_ne(const Value& value, const CallArgs& args) { return !equals(value, argument(args, "ne")); }
bool is_lt(const Value& value, const CallArgs& args) { return compare(value, argument(args, "lt"), "<") < 0; }
bool is_le(const Value& value, const CallArgs& args) { return compare(value, argument(args, "le"), "<=") <= 0; }
bool is_gt(const Value& value, const CallArgs& args) { return compare(value, argument(args, "gt"), ">") > 0; }
bool is_ge(const Value& value, const CallArgs& args) { return compare(value, argument(args, "ge"), ">=") >= 0; }
bool is_in(const Value& value, const CallArgs& args) { return contains(argument(args, "in"), value); }
bool is_sameas(const Value& value, const CallArgs& args) { return value.same_object(argument(args, "sameas")); }
bool is_lower(const Value& value, const CallArgs&) {
  CallArgs no_args;
  return truthy(get_attribute(Value::string(to_str(value)), "islower").as_function().call(no_args));
}
bool is_upper(const Value& value, const CallArgs&) {
  CallArgs no_args;
  return truthy(get_attribute(Value::string(to_str(value)), "isupper").as_function().call(no_args));
}
bool is_filter(const Value& value, const CallArgs&) {
  return value.is_string() && find_filter(value.as_string()) != nullptr;
}
bool is_test(const Value& value, const CallArgs&) {
  return value.is_string() && find_test(value.as_string()) != nullptr;
}
bool is_escaped(const Value&, const CallArgs&) { return false; }

}  // namespace

TestFn find_test(std::string_view name) {
  static const std::unordered_map<std::string_view, TestFn> kTests = {
      {"boolean", is_boolean},
      {"callable", is_callable},
      {"defined", is_defined},
      {"divisibleby", is_divisibleby},
      {"eq", is_eq},
      {"equalto", is_eq},
      {"==", is_eq},
      {"escaped", is_escaped},
      {"even", is_even},
      {"false", is_false},
      {"filter", is_filter},
      {"float", is_float},
      {"ge", is_ge},
      {">=", is_ge},
      {"gt", is_gt},
      {">", is_gt},
      {"greaterthan", is_gt},
      {"in", is_in},
      {"integer", is_integer},
      {"iterable", is_iterable},
      {"le", is_le},
      {"<=", is_le},
      {"lower", is_lower},
      {"lt", is_lt},
      {"<", is_lt},
      {"lessthan", is_lt},
      {"mapping", is_mapping},
      {"ne", is_ne},
      {"!=", is_ne},
      {"none", is_none},
      {"number", is_number},
      {"odd", is_odd},
      {"sameas", is_sameas},
      {"sequence", is_sequence},
      {"string", is_string},
      {"test", is_test},
      {"true", is_true},
      {"undefined", is_undefined},
      {"upper", is_upper},
  };
  const auto found = kTests.find(name);
  return found != kTests.end() ? found->second : nullptr;
}

}  // namespace rs::chat
