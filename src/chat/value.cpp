// Value construction and the Python semantics shared by the evaluator and the builtins.
#include "chat/value.h"

#include <fmt/format.h>

#include "base/error.h"
#include "chat/python_format.h"
#include "chat/template_error.h"
#include "chat/utf8.h"

namespace rs::chat {

Value Value::undefined(std::string hint) {
  Value value;
  value.data_ = UndefinedTag{std::move(hint)};
  return value;
}

Value Value::none() {
  Value value;
  value.data_ = nullptr;
  return value;
}

Value Value::boolean(bool flag) {
  Value value;
  value.data_ = flag;
  return value;
}

Value Value::integer(int64_t number) {
  Value value;
  value.data_ = number;
  return value;
}

Value Value::number(double number) {
  Value value;
  value.data_ = number;
  return value;
}

Value Value::string(std::string text) {
  Value value;
  value.data_ = std::move(text);
  return value;
}

Value Value::list(List items) {
  Value value;
  value.data_ = std::make_shared<List>(std::move(items));
  return value;
}

Value Value::tuple(List items) {
  Value value = list(std::move(items));
  value.is_tuple_ = true;
  return value;
}

Value Value::dict(Dict entries) {
  Value value;
  value.data_ = std::make_shared<Dict>(std::move(entries));
  return value;
}

Value Value::empty_dict() { return dict(Dict{}); }

Value Value::namespace_object(Dict entries) {
  entries.is_namespace = true;
  return dict(std::move(entries));
}

Value Value::function(std::string name, NativeFunction call) {
  Value value;
  value.data_ = std::make_shared<const Function>(Function{std::move(name), std::move(call)});
  return value;
}

namespace {
// Nesting from_json follows before it refuses: it recurses per level, and request bodies are capped far below this.
constexpr int kMaxFromJsonDepth = 256;
}  // namespace

Value Value::from_json(const nlohmann::ordered_json& json) { return from_json(json, 0); }

Value Value::from_json(const nlohmann::ordered_json& json, int depth) {
  RS_CHECK(depth < kMaxFromJsonDepth, "JSON nested more than {} levels deep", kMaxFromJsonDepth);
  using Type = nlohmann::ordered_json::value_t;
  switch (json.type()) {
    case Type::null: return none();
    case Type::boolean: return boolean(json.get<bool>());
    case Type::number_integer: return integer(json.get<int64_t>());
    case Type::number_unsigned: {
      const auto number = json.get<uint64_t>();
      if (number > static_cast<uint64_t>(INT64_MAX)) return Value::number(static_cast<double>(number));
      return integer(static_cast<int64_t>(number));
    }
    case Type::number_float: return number(json.get<double>());
    case Type::string: return string(json.get<std::string>());
    case Type::array: {
      List items;
      items.reserve(json.size());
      for (const auto& item : json) items.push_back(from_json(item, depth + 1));
      return list(std::move(items));
    }
    case Type::object: {
      Dict entries;
      for (auto it = json.begin(); it != json.end(); ++it) entries.set(it.key(), from_json(it.value(), depth + 1));
      return dict(std::move(entries));
    }
    default: return none();
  }
}

bool Value::is_namespace() const { return is_dict() && as_dict().is_namespace; }

int64_t Value::as_int() const { return is_bool() ? static_cast<int64_t>(as_bool()) : std::get<int64_t>(data_); }

double Value::as_float() const { return is_float() ? std::get<double>(data_) : static_cast<double>(as_int()); }

bool Value::same_object(const Value& other) const {
  if (kind() != other.kind()) return false;
  switch (kind()) {
    case Kind::kList: return &as_list() == &other.as_list();
    case Kind::kDict: return &as_dict() == &other.as_dict();
    case Kind::kFunction: return &as_function() == &other.as_function();
    default: return equals(*this, other);
  }
}

const Value* Dict::find(std::string_view key) const {
  for (const auto& entry : entries_) {
    if (entry.first == key) return &entry.second;
  }
  return nullptr;
}

Value* Dict::find(std::string_view key) {
  for (auto& entry : entries_) {
    if (entry.first == key) return &entry.second;
  }
  return nullptr;
}

void Dict::set(std::string key, Value value) {
  if (Value* existing = find(key)) {
    *existing = std::move(value);
  } else {
    entries_.emplace_back(std::move(key), std::move(value));
  }
}

bool truthy(const Value& value) {
  switch (value.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone: return false;
    case Value::Kind::kBool: return value.as_bool();
    case Value::Kind::kInt: return value.as_int() != 0;
    case Value::Kind::kFloat: return value.as_float() != 0.0;
    case Value::Kind::kString: return !value.as_string().empty();
    case Value::Kind::kList: return !value.as_list().empty();
    case Value::Kind::kDict: return value.is_namespace() || !value.as_dict().empty();
    case Value::Kind::kFunction: return true;
  }
  return false;
}

std::string type_name(const Value& value) {
  switch (value.kind()) {
    case Value::Kind::kUndefined: return "Undefined";
    case Value::Kind::kNone: return "NoneType";
    case Value::Kind::kBool: return "bool";
    case Value::Kind::kInt: return "int";
    case Value::Kind::kFloat: return "float";
    case Value::Kind::kString: return "str";
    case Value::Kind::kList: return value.is_tuple() ? "tuple" : "list";
    case Value::Kind::kDict: return value.is_namespace() ? "Namespace" : "dict";
    case Value::Kind::kFunction: return "function";
  }
  return "object";
}

namespace {

std::string dict_repr(const Dict& dict) {
  std::string out = "{";
  bool first = true;
  for (const auto& [key, item] : dict.entries()) {
    if (!first) out += ", ";
    first = false;
    out += python_string_repr(key) + ": " + repr(item);
  }
  return out + "}";
}

}  // namespace

std::string to_str(const Value& value) {
  switch (value.kind()) {
    case Value::Kind::kUndefined: return "";
    case Value::Kind::kString: return value.as_string();
    default: return repr(value);
  }
}

std::string repr(const Value& value) {
  // Bounded like Python's recursion limit, so deeply nested input cannot overflow the stack.
  thread_local int depth = 0;
  if (depth > 100) fault("maximum recursion depth exceeded while getting the repr of an object");
  struct DepthGuard {
    DepthGuard() { ++depth; }
    ~DepthGuard() { --depth; }
  } guard;
  switch (value.kind()) {
    case Value::Kind::kUndefined: return "Undefined";
    case Value::Kind::kNone: return "None";
    case Value::Kind::kBool: return value.as_bool() ? "True" : "False";
    case Value::Kind::kInt: return std::to_string(value.as_int());
    case Value::Kind::kFloat: return python_float_repr(value.as_float());
    case Value::Kind::kString: return python_string_repr(value.as_string());
    case Value::Kind::kList: {
      std::string out = value.is_tuple() ? "(" : "[";
      bool first = true;
      for (const auto& item : value.as_list()) {
        if (!first) out += ", ";
        first = false;
        out += repr(item);
      }
      if (value.is_tuple()) return out + (value.as_list().size() == 1 ? ",)" : ")");
      return out + "]";
    }
    case Value::Kind::kDict:
      if (value.is_namespace()) return "<Namespace " + dict_repr(value.as_dict()) + ">";
      return dict_repr(value.as_dict());
    case Value::Kind::kFunction: return "<function " + value.as_function().name + ">";
  }
  return "";
}

bool equals(const Value& lhs, const Value& rhs) {
  if (lhs.is_numeric() && rhs.is_numeric()) {
    if (lhs.is_float() || rhs.is_float()) return lhs.as_float() == rhs.as_float();
    return lhs.as_int() == rhs.as_int();
  }
  if (lhs.kind() != rhs.kind()) return false;
  switch (lhs.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone: return true;
    case Value::Kind::kString: return lhs.as_string() == rhs.as_string();
    case Value::Kind::kList: {
      const List& a = lhs.as_list();
      const List& b = rhs.as_list();
      if (a.size() != b.size()) return false;
      for (size_t i = 0; i < a.size(); ++i) {
        if (!equals(a[i], b[i])) return false;
      }
      return true;
    }
    case Value::Kind::kDict: {
      if (lhs.is_namespace() || rhs.is_namespace()) return &lhs.as_dict() == &rhs.as_dict();
      const Dict& a = lhs.as_dict();
      const Dict& b = rhs.as_dict();
      if (a.size() != b.size()) return false;
      for (const auto& [key, item] : a.entries()) {
        const Value* other = b.find(key);
        if (other == nullptr || !equals(item, *other)) return false;
      }
      return true;
    }
    case Value::Kind::kFunction: return &lhs.as_function() == &rhs.as_function();
    default: return false;
  }
}

int compare(const Value& lhs, const Value& rhs, std::string_view op) {
  if (lhs.is_undefined()) fail_undefined(lhs);
  if (rhs.is_undefined()) fail_undefined(rhs);
  if (lhs.is_numeric() && rhs.is_numeric()) {
    if (lhs.is_float() || rhs.is_float()) {
      const double a = lhs.as_float();
      const double b = rhs.as_float();
      return a < b ? -1 : (a > b ? 1 : 0);
    }
    const int64_t a = lhs.as_int();
    const int64_t b = rhs.as_int();
    return a < b ? -1 : (a > b ? 1 : 0);
  }
  if (lhs.is_string() && rhs.is_string()) {
    const int result = lhs.as_string().compare(rhs.as_string());
    return result < 0 ? -1 : (result > 0 ? 1 : 0);
  }
  if (lhs.is_list() && rhs.is_list()) {
    const List& a = lhs.as_list();
    const List& b = rhs.as_list();
    for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
      if (!equals(a[i], b[i])) return compare(a[i], b[i], op);
    }
    return a.size() < b.size() ? -1 : (a.size() > b.size() ? 1 : 0);
  }
  fault(fmt::format("'{}' not supported between instances of '{}' and '{}'", op, type_name(lhs), type_name(rhs)));
}

List iterate(const Value& value) {
  switch (value.kind()) {
    case Value::Kind::kUndefined: return {};
    case Value::Kind::kList: return value.as_list();
    case Value::Kind::kString: {
      List chars;
      for (char32_t c : decode_utf8(value.as_string())) {
        std::string one;
        append_utf8(one, c);
        chars.push_back(Value::string(std::move(one)));
      }
      return chars;
    }
    case Value::Kind::kDict: {
      if (value.is_namespace()) break;
      List keys;
      for (const auto& entry : value.as_dict().entries()) keys.push_back(Value::string(entry.first));
      return keys;
    }
    default: break;
  }
  fault(fmt::format("'{}' object is not iterable", type_name(value)));
}

int64_t length(const Value& value) {
  switch (value.kind()) {
    case Value::Kind::kUndefined: return 0;
    case Value::Kind::kString: return static_cast<int64_t>(utf8_length(value.as_string()));
    case Value::Kind::kList: return static_cast<int64_t>(value.as_list().size());
    case Value::Kind::kDict:
      if (!value.is_namespace()) return static_cast<int64_t>(value.as_dict().size());
      break;
    default: break;
  }
  fault(fmt::format("object of type '{}' has no len()", type_name(value)));
}

void fail_undefined(const Value& value) {
  fault(value.undefined_hint().empty() ? "value is undefined" : value.undefined_hint());
}

nlohmann::ordered_json to_json(const Value& value) {
  switch (value.kind()) {
    case Value::Kind::kNone: return nullptr;
    case Value::Kind::kBool: return value.as_bool();
    case Value::Kind::kInt: return value.as_int();
    case Value::Kind::kFloat: return value.as_float();
    case Value::Kind::kString: return value.as_string();
    case Value::Kind::kList: {
      auto array = nlohmann::ordered_json::array();
      for (const auto& item : value.as_list()) array.push_back(to_json(item));
      return array;
    }
    case Value::Kind::kDict: {
      if (value.is_namespace()) break;
      auto object = nlohmann::ordered_json::object();
      for (const auto& [key, item] : value.as_dict().entries()) object[key] = to_json(item);
      return object;
    }
    default: break;
  }
  fault(fmt::format("Object of type {} is not JSON serializable", type_name(value)));
}

}  // namespace rs::chat
