// Global functions of the template environment (jinja2 defaults plus transformers' raise_exception and
// strftime_now), and ArgReader, the Python-style argument binder the builtins share.
#include <fmt/format.h>

#include <algorithm>

#include "chat/builtins.h"
#include "chat/template_error.h"

namespace rs::chat {

ArgReader::ArgReader(const CallArgs& args, std::string_view function, std::initializer_list<std::string_view> params)
    : args_(args), params_(params) {
  for (const auto& [name, value] : args.keyword) {
    if (std::find(params_.begin(), params_.end(), name) == params_.end()) {
      fault(fmt::format("{}() got an unexpected keyword argument '{}'", function, name));
    }
  }
}

const Value* ArgReader::get(size_t index) const {
  if (index < args_.positional.size()) return &args_.positional[index];
  for (const auto& [name, value] : args_.keyword) {
    if (name == params_[index]) return &value;
  }
  return nullptr;
}

Value ArgReader::get_or(size_t index, Value fallback) const {
  const Value* value = get(index);
  return value != nullptr ? *value : std::move(fallback);
}

std::vector<Value> ArgReader::extra_positional() const {
  if (args_.positional.size() <= params_.size()) return {};
  return std::vector<Value>(args_.positional.begin() + static_cast<std::ptrdiff_t>(params_.size()),
                            args_.positional.end());
}

namespace {

Value range(CallArgs& args) {
  constexpr int64_t kMaxRange = 100000;  // jinja2.sandbox.MAX_RANGE
  std::vector<int64_t> bounds;
  for (const Value& arg : args.positional) {
    if (!arg.is_int() && !arg.is_bool())
      fault(fmt::format("'{}' object cannot be interpreted as an integer", type_name(arg)));
    bounds.push_back(arg.as_int());
  }
  if (bounds.empty() || bounds.size() > 3) fault(fmt::format("range expected 1 to 3 arguments, got {}", bounds.size()));
  const int64_t start = bounds.size() == 1 ? 0 : bounds[0];
  const int64_t stop = bounds.size() == 1 ? bounds[0] : bounds[1];
  const int64_t step = bounds.size() == 3 ? bounds[2] : 1;
  if (step == 0) fault("range() arg 3 must not be zero");
  List items;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    if (static_cast<int64_t>(items.size()) >= kMaxRange) {
      fault("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
    }
    items.push_back(Value::integer(i));
  }
  return Value::list(std::move(items));
}

// dict(mapping?, **kwargs), as namespace() and dict() take it.
Dict dict_from_args(const CallArgs& args, std::string_view function) {
  if (args.positional.size() > 1)
    fault(fmt::format("{} expected at most 1 argument, got {}", function, args.positional.size()));
  Dict entries;
  if (!args.positional.empty()) {
    const Value& source = args.positional.front();
    if (!source.is_dict() || source.is_namespace())
      fault(fmt::format("cannot convert '{}' to a dictionary", type_name(source)));
    entries = source.as_dict();
    entries.is_namespace = false;
  }
  for (const auto& [name, value] : args.keyword) entries.set(name, value);
  return entries;
}

std::string format_time(const std::string& format, const std::tm& now) {
  if (format.empty()) return "";
  std::string buffer(format.size() * 4 + 64, '\0');
  while (true) {
    const size_t written = std::strftime(buffer.data(), buffer.size(), format.c_str(), &now);
    if (written > 0) return buffer.substr(0, written);
    if (buffer.size() > 65536) return "";
    buffer.resize(buffer.size() * 2);
  }
}

}  // namespace

Dict make_globals(const std::tm& now) {
  Dict globals;
  globals.set("range", Value::function("range", range));
  globals.set("namespace", Value::function("namespace", [](CallArgs& args) {
                return Value::namespace_object(dict_from_args(args, "namespace"));
              }));
  globals.set("dict",
              Value::function("dict", [](CallArgs& args) { return Value::dict(dict_from_args(args, "dict")); }));
  globals.set("joiner", Value::function("joiner", [](CallArgs& args) {
                const std::string separator = to_str(ArgReader(args, "joiner", {"sep"}).get_or(0, Value::string(", ")));
                auto used = std::make_shared<bool>(false);
                return Value::function("joiner", [separator, used](CallArgs&) {
                  const bool first = !*used;
                  *used = true;
                  return Value::string(first ? "" : separator);
                });
              }));
  globals.set("raise_exception", Value::function("raise_exception", [](CallArgs& args) -> Value {
                const Value message = ArgReader(args, "raise_exception", {"message"}).get_or(0, Value::string(""));
                throw RaiseFault{to_str(message)};
              }));
  globals.set("strftime_now", Value::function("strftime_now", [now](CallArgs& args) {
                const Value format = ArgReader(args, "strftime_now", {"format"}).get_or(0, Value::string(""));
                if (!format.is_string()) fault("strftime() argument 1 must be str");
                return Value::string(format_time(format.as_string(), now));
              }));
  return globals;
}

}  // namespace rs::chat
