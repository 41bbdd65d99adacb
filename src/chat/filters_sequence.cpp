// Sequence filters (jinja2 semantics): first/last/list/join/map/select*/reject*/sort/unique/dictsort/...
#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>

#include "chat/builtins.h"
#include "chat/template_error.h"
#include "chat/utf8.h"

namespace rs::chat {
namespace {

// jinja2 make_attrgetter: "a.b.0" looks up a, then b, then item 0 (environment.getitem at each step).
Value get_path(const Value& item, const std::string& path) {
  Value current = item;
  size_t start = 0;
  while (start <= path.size()) {
    const size_t dot = std::min(path.find('.', start), path.size());
    const std::string part = path.substr(start, dot - start);
    if (current.is_undefined()) fail_undefined(current);
    const bool numeric =
        !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    current = get_item(current, numeric ? Value::integer(std::stoll(part)) : Value::string(part));
    start = dot + 1;
  }
  return current;
}

// Sort key for case-insensitive comparisons (jinja2 ignore_case).
Value fold_case(const Value& value, bool case_sensitive) {
  if (case_sensitive || !value.is_string()) return value;
  std::string lowered;
  for (char32_t c : decode_utf8(value.as_string())) append_utf8(lowered, to_lower(c));
  return Value::string(std::move(lowered));
}

Value key_of(const Value& item, const Value& attribute, bool case_sensitive) {
  return fold_case(attribute.is_none() ? item : get_path(item, to_str(attribute)), case_sensitive);
}

Value first_filter(const Value& input, const CallArgs&) {
  const List items = iterate(input);
  return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
}

Value last_filter(const Value& input, const CallArgs&) {
  const List items = iterate(input);
  return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
}

Value list_filter(const Value& input, const CallArgs&) { return Value::list(iterate(input)); }

Value reverse_filter(const Value& input, const CallArgs&) {
  if (input.is_string()) {
    std::u32string chars = decode_utf8(input.as_string());
    std::reverse(chars.begin(), chars.end());
    return Value::string(encode_utf8(chars));
  }
  List items = iterate(input);
  std::reverse(items.begin(), items.end());
  return Value::list(std::move(items));
}

Value join_filter(const Value& input, const CallArgs& args) {
  const ArgReader read(args, "join", {"d", "attribute"});
  const std::string separator = to_str(read.get_or(0, Value::string("")));
  const Value attribute = read.get_or(1, Value::none());
  std::string out;
  bool first = true;
  for (const Value& item : iterate(input)) {
    if (!first) out += separator;
    first = false;
    out += to_str(attribute.is_none() ? item : get_path(item, to_str(attribute)));
  }
  return Value::string(std::move(out));
}

Value items_filter(const Value& input, const CallArgs&) {
  if (input.is_undefined()) return Value::list();
  if (!input.is_dict() || input.is_namespace()) fault("Can only get item pairs from a mapping.");
  List pairs;
  for (const auto& [key, item] : input.as_dict().entries()) pairs.push_back(Value::tuple({Value::string(key), item}));
  return Value::list(std::move(pairs));
}

Value dictsort_filter(const Value& input, const CallArgs& args) {
  const ArgReader read(args, "dictsort", {"case_sensitive", "by", "reverse"});
  const bool case_sensitive = truthy(read.get_or(0, Value::boolean(false)));
  const std::string by = to_str(read.get_or(1, Value::string("key")));
  const bool reverse = truthy(read.get_or(2, Value::boolean(false)));
  if (by != "key" && by != "value") fault("You can only sort by either \"key\" or \"value\"");
  List pairs = items_filter(input, CallArgs{}).as_list();
  const size_t position = by == "key" ? 0 : 1;
  std::stable_sort(pairs.begin(), pairs.end(), [&](const Value& a, const Value& b) {
    const int order = compare(fold_case(a.as_list()[position], case_sensitive),
                              fold_case(b.as_list()[position], case_sensitive), "<");
    return reverse ? order > 0 : order < 0;
  });
  return Value::list(std::move(pairs));
}

Value sort_filter(const Value& input, const CallArgs& args) {
  const ArgReader read(args, "sort", {"reverse", "case_sensitive", "attribute"});
  const bool reverse = truthy(read.get_or(0, Value::boolean(false)));
  const bool case_sensitive = truthy(read.get_or(1, Value::boolean(false)));
  const Value attribute = read.get_or(2, Value::none());
  List items = iterate(input);
  std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
    const int order = compare(key_of(a, attribute, case_sensitive), key_of(b, attribute, case_sensitive), "<");
    return reverse ? order > 0 : order < 0;
  });
  return Value::list(std::move(items));
}

Value unique_filter(const Value& input, const CallArgs& args) {
  const ArgReader read(args, "unique", {"case_sensitive", "attribute"});
  const bool case_sensitive = truthy(read.get_or(0, Value::boolean(false)));
  const Value attribute = read.get_or(1, Value::none());
  List seen;
  List out;
  for (const Value& item : iterate(input)) {
    const Value key = key_of(item, attribute, case_sensitive);
    if (std::any_of(seen.begin(), seen.end(), [&](const Value& other) { return equals(other, key); })) continue;
    seen.push_back(key);
    out.push_back(item);
  }
  return Value::list(std::move(out));
}

Value extreme(const Value& input, const CallArgs& args, std::string_view name, bool want_max) {
  const ArgReader read(args, name, {"case_sensitive", "attribute"});
  const bool case_sensitive = truthy(read.get_or(0, Value::boolean(false)));
  const Value attribute = read.get_or(1, Value::none());
  const List items = iterate(input);
  if (items.empty()) return Value::undefined(fmt::format("No aggregated item, sequence was empty."));
  size_t best = 0;
  for (size_t i = 1; i < items.size(); ++i) {
    const int order =
        compare(key_of(items[i], attribute, case_sensitive), key_of(items[best], attribute, case_sensitive), "<");
    if (want_max ? order > 0 : order < 0) best = i;
  }
  return items[best];
}

Value max_filter(const Value& input, const CallArgs& args) { return extreme(input, args, "max", true); }
Value min_filter(const Value& input, const CallArgs& args) { return extreme(input, args, "min", false); }

Value sum_filter(const Value& input, const CallArgs& args) {
  const ArgReader read(args, "sum", {"attribute", "start"});
  const Value attribute = read.get_or(0, Value::none());
  Value total = read.get_or(1, Value::integer(0));
  for (const Value& item : iterate(input))
    total = binary_op("+", total, attribute.is_none() ? item : get_path(item, to_str(attribute)));
  return total;
}

Value batch_filter(const Value& input, const CallArgs& args) {
  const ArgReader read(args, "batch", {"linecount", "fill_with"});
  if (read.get(0) == nullptr) fault("batch() missing required argument 'linecount'");
  const int64_t size = read.get(0)->as_int();
  if (size <= 0) fault("batch linecount must be positive");
  const Value fill = read.get_or(1, Value::none());
  List batches;
  List current;
  for (const Value& item : iterate(input)) {
    current.push_back(item);
    if (static_cast<int64_t>(current.size()) == size) batches.push_back(Value::list(std::exchange(current, {})));
  }
  if (!current.empty()) {
    while (!fill.is_none() && static_cast<int64_t>(current.size()) < size) current.push_back(fill);
    batches.push_back(Value::list(std::move(current)));
  }
  return Value::list(std::move(batches));
}

// map(attribute='x', default=...) or map('filter', *args).
Value map_filter(const Value& input, const CallArgs& args) {
  const List items = iterate(input);
  List out;
  for (const auto& [name, value] : args.keyword) {
    if (name != "attribute" && name != "default")
      fault(fmt::format("map() got an unexpected keyword argument '{}'", name));
  }
  if (args.positional.empty()) {
    const Value* attribute = nullptr;
    const Value* fallback = nullptr;
    for (const auto& [name, value] : args.keyword) (name == "attribute" ? attribute : fallback) = &value;
    if (attribute == nullptr) fault("map requires a filter argument");
    for (const Value& item : items) {
      Value mapped = get_path(item, to_str(*attribute));
      out.push_back(mapped.is_undefined() && fallback != nullptr ? *fallback : mapped);
    }
    return Value::list(std::move(out));
  }
  const std::string filter_name = to_str(args.positional.front());
  const FilterFn filter = find_filter(filter_name);
  if (filter == nullptr) fault(fmt::format("No filter named '{}'.", filter_name));
  CallArgs filter_args{std::vector<Value>(args.positional.begin() + 1, args.positional.end()), args.keyword};
  for (const Value& item : items) out.push_back(filter(item, filter_args));
  return Value::list(std::move(out));
}

// select/reject(test, *args) and selectattr/rejectattr(attribute, test, *args).
Value select_items(const Value& input, const CallArgs& args, bool by_attribute, bool keep_matches) {
  size_t next = 0;
  std::string attribute;
  if (by_attribute) {
    if (args.positional.empty()) fault("Missing parameter for attribute name");
    attribute = to_str(args.positional[next++]);
  }
  TestFn test = nullptr;
  if (next < args.positional.size()) {
    const std::string test_name = to_str(args.positional[next++]);
    test = find_test(test_name);
    if (test == nullptr) fault(fmt::format("No test named '{}'.", test_name));
  }
  CallArgs test_args{
      std::vector<Value>(args.positional.begin() + static_cast<std::ptrdiff_t>(next), args.positional.end()),
      args.keyword};
  List out;
  for (const Value& item : iterate(input)) {
    const Value subject = by_attribute ? get_path(item, attribute) : item;
    const bool matched = test != nullptr ? test(subject, test_args) : truthy(subject);
    if (matched == keep_matches) out.push_back(item);
  }
  return Value::list(std::move(out));
}

Value select_filter(const Value& input, const CallArgs& args) { return select_items(input, args, false, true); }
Value reject_filter(const Value& input, const CallArgs& args) { return select_items(input, args, false, false); }
Value selectattr_filter(const Value& input, const CallArgs& args) { return select_items(input, args, true, true); }
Value rejectattr_filter(const Value& input, const CallArgs& args) { return select_items(input, args, true, false); }

}  // namespace

FilterFn find_sequence_filter(std::string_view name) {
  static const std::unordered_map<std::string_view, FilterFn> kFilters = {
      {"batch", batch_filter},     {"dictsort", dictsort_filter}, {"first", first_filter},
      {"items", items_filter},     {"join", join_filter},         {"last", last_filter},
      {"list", list_filter},       {"map", map_filter},           {"max", max_filter},
      {"min", min_filter},         {"reject", reject_filter},     {"rejectattr", rejectattr_filter},
      {"reverse", reverse_filter}, {"select", select_filter},     {"selectattr", selectattr_filter},
      {"sort", sort_filter},       {"sum", sum_filter},           {"unique", unique_filter},
  };
  const auto found = kFilters.find(name);
  return found != kFilters.end() ? found->second : nullptr;
}

}  // namespace rs::chat
