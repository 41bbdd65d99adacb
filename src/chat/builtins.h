// The interpreter's built-in behaviour, with jinja2 (ImmutableSandboxedEnvironment) semantics: operators,
// attribute and item lookup (Python methods of str/dict/list), filters, tests and global functions.
// Failures throw EvalFault (the evaluator adds the source position); raise_exception throws RaiseFault.
#pragma once

#include <ctime>
#include <initializer_list>
#include <string>
#include <string_view>

#include "chat/value.h"

namespace rs::chat {

// Thrown by raise_exception(message); becomes TemplateRaised at the call site.
struct RaiseFault {
  std::string message;
};

// Reads a builtin's arguments by declared parameter name, from positions or keywords, Python style.
class ArgReader {
 public:
  ArgReader(const CallArgs& args, std::string_view function, std::initializer_list<std::string_view> params);
  // The argument for the i-th declared parameter, or nullptr when not given.
  const Value* get(size_t index) const;
  Value get_or(size_t index, Value fallback) const;
  // Positional arguments beyond the declared parameters (for *args builtins).
  std::vector<Value> extra_positional() const;

 private:
  const CallArgs& args_;
  std::vector<std::string_view> params_;
};

// Operators. op: "+", "-", "*", "/", "//", "%", "**".
Value binary_op(std::string_view op, const Value& lhs, const Value& rhs);
Value negate(const Value& operand);
// Python `needle in haystack`.
bool contains(const Value& haystack, const Value& needle);
// op: "==", "!=", "<", "<=", ">", ">=", "in", "notin".
bool compare_op(std::string_view op, const Value& lhs, const Value& rhs);

// jinja2 getattr/getitem: attribute first for obj.name, item first for obj[key]; a failed lookup is an
// undefined value (an error only when used). The object must not be undefined.
Value get_attribute(const Value& object, const std::string& name);
Value get_item(const Value& object, const Value& key);
// Python slicing object[start:stop:step] of a list or string; absent parts are undefined values.
Value slice_value(const Value& object, const Value& start, const Value& stop, const Value& step);

using FilterFn = Value (*)(const Value& input, const CallArgs& args);
using TestFn = bool (*)(const Value& input, const CallArgs& args);
// nullptr when there is no such filter or test.
FilterFn find_filter(std::string_view name);
TestFn find_test(std::string_view name);

// Global functions: range, namespace, dict, raise_exception, strftime_now (formatting `now`, local time).
Dict make_globals(const std::tm& now);

// Python str.strip/lstrip/rstrip with an optional set of characters (whitespace when chars is null).
std::string python_strip(const std::string& text, const std::string* chars, bool left, bool right);

}  // namespace rs::chat
