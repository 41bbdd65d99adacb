// Runtime values of the Jinja interpreter: Python-like dynamic values. Lists, dicts and namespaces are
// shared by reference (as Python objects are); undefined is distinct from none.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace rs::chat {

class Value;
class Dict;
using List = std::vector<Value>;

// Arguments of a call: f(1, 2, key=3) -> positional {1, 2}, keyword {{"key", 3}}.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

using NativeFunction = std::function<Value(CallArgs&)>;

struct Function {
  std::string name;  // for error messages and repr
  NativeFunction call;
};

class Value {
 public:
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kFunction };

  Value() = default;  // undefined, no hint
  static Value undefined(std::string hint);
  static Value none();
  static Value boolean(bool value);
  static Value integer(int64_t value);
  static Value number(double value);
  static Value string(std::string value);
  static Value list(List items = {});
  // A Python tuple: a list that prints as (a, b).
  static Value tuple(List items);
  static Value dict(Dict entries);
  static Value empty_dict();
  // A jinja2 namespace(): attribute-only, assignable with {% set ns.attr = ... %}.
  static Value namespace_object(Dict entries);
  static Value function(std::string name, NativeFunction call);
  // Deep conversion; JSON objects keep their key order. Throws rs::Error beyond 256 levels of nesting.
  static Value from_json(const nlohmann::ordered_json& json);

  Kind kind() const { return static_cast<Kind>(data_.index()); }
  bool is_undefined() const { return kind() == Kind::kUndefined; }
  bool is_none() const { return kind() == Kind::kNone; }
  bool is_bool() const { return kind() == Kind::kBool; }
  bool is_int() const { return kind() == Kind::kInt; }
  bool is_float() const { return kind() == Kind::kFloat; }
  // int, float or bool (Python bool is an int).
  bool is_numeric() const { return is_int() || is_float() || is_bool(); }
  bool is_string() const { return kind() == Kind::kString; }
  bool is_list() const { return kind() == Kind::kList; }
  bool is_tuple() const { return is_tuple_; }
  bool is_dict() const { return kind() == Kind::kDict; }
  bool is_namespace() const;
  bool is_function() const { return kind() == Kind::kFunction; }

  bool as_bool() const { return std::get<bool>(data_); }
  // int or bool as an integer.
  int64_t as_int() const;
  // Any numeric as a double.
  double as_float() const;
  const std::string& as_string() const { return std::get<std::string>(data_); }
  List& as_list() const { return *std::get<std::shared_ptr<List>>(data_); }
  Dict& as_dict() const { return *std::get<std::shared_ptr<Dict>>(data_); }
  const Function& as_function() const { return *std::get<std::shared_ptr<const Function>>(data_); }
  // Why this value is undefined ("'x' is undefined"), for the error raised when it is used.
  const std::string& undefined_hint() const { return std::get<UndefinedTag>(data_).hint; }
  // Same object (Python `is`), for containers and functions.
  bool same_object(const Value& other) const;

 private:
  static Value from_json(const nlohmann::ordered_json& json, int depth);  // depth: containers above `json`

  struct UndefinedTag {
    std::string hint;
  };
  std::variant<UndefinedTag, std::nullptr_t, bool, int64_t, double, std::string, std::shared_ptr<List>,
               std::shared_ptr<Dict>, std::shared_ptr<const Function>>
      data_;
  bool is_tuple_ = false;
};

// Insertion-ordered string-keyed map (Python dict semantics for the keys JSON can carry).
class Dict {
 public:
  using Entry = std::pair<std::string, Value>;

  const Value* find(std::string_view key) const;
  Value* find(std::string_view key);
  // Replaces the value of an existing key in place, else appends.
  void set(std::string key, Value value);
  size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  const std::vector<Entry>& entries() const { return entries_; }

  bool is_namespace = false;

 private:
  std::vector<Entry> entries_;
};

// Python semantics of the operations that the evaluator and the builtins share. Failures throw EvalFault.
bool truthy(const Value& value);
// Python type name: 'str', 'int', 'NoneType', 'dict', ...
std::string type_name(const Value& value);
// Python str(): what {{ value }} prints. Undefined prints as "".
std::string to_str(const Value& value);
// Python repr(), used inside printed lists and dicts.
std::string repr(const Value& value);
bool equals(const Value& lhs, const Value& rhs);
// Python ordering for <, <=, >, >=: returns <0, 0, >0; faults for unorderable types.
int compare(const Value& lhs, const Value& rhs, std::string_view op);
// Python iteration: list items, dict keys, string characters; undefined iterates as empty.
List iterate(const Value& value);
// Python len(); undefined has length 0.
int64_t length(const Value& value);
// Faults with the undefined value's hint.
[[noreturn]] void fail_undefined(const Value& value);
// JSON for tojson: faults on undefined, functions and namespaces (not JSON serializable).
nlohmann::ordered_json to_json(const Value& value);

}  // namespace rs::chat
