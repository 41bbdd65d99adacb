#include "grammar/json_schema.h"

#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "base/error.h"
#include "grammar/json_numbers.h"
#include "grammar/regex.h"

namespace rs::grammar {
namespace {

// Ordered: properties are generated in the order the schema lists them.
using json = nlohmann::ordered_json;

// Keywords that change which instances are valid and that the grammar does not enforce: refused, never ignored.
const std::set<std::string> kUnsupported = {"not",
                                            "if",
                                            "then",
                                            "else",
                                            "patternProperties",
                                            "dependentRequired",
                                            "dependentSchemas",
                                            "dependencies",
                                            "propertyNames",
                                            "contains",
                                            "minContains",
                                            "maxContains",
                                            "minProperties",
                                            "maxProperties",
                                            "unevaluatedProperties",
                                            "unevaluatedItems",
                                            "multipleOf",
                                            "$dynamicRef",
                                            "$recursiveRef"};

// Common string formats (RFC 3339 dates and times, UUIDs, IPv4, a practical email subset).
const std::map<std::string, std::string> kFormats = {
    {"date", R"([0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01]))"},
    {"time", R"(([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]+)?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9]))"},
    {"date-time",
     R"([0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]+)?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9]))"},
    {"uuid", "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"},
    {"ipv4", R"(((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9]))"},
    {"email", R"([a-zA-Z0-9_+-]+(\.[a-zA-Z0-9_+-]+)*@[a-zA-Z0-9-]+(\.[a-zA-Z0-9-]+)+)"},
};

std::string literal(const json& value) { return value.dump(); }

// A pattern over the decoded string, turned into one over its JSON text: characters JSON must escape leave the
// classes, and literal quotes or backslashes appear escaped.
Expr json_safe(Expr e) {
  using K = Expr::Kind;
  switch (e.kind) {
    case K::kBytes: {
      std::string text;
      for (char c : e.text) {
        if (c == '"' || c == '\\') text += '\\';
        if (static_cast<unsigned char>(c) < 0x20) {
          text += fmt::format("\\u{:04x}", static_cast<int>(c));
          continue;
        }
        text += c;
      }
      e.text = std::move(text);
      return e;
    }
    case K::kClass: {
      const std::vector<std::pair<char32_t, char32_t>> unsafe = {{0, 0x1F}, {'"', '"'}, {'\\', '\\'}};
      if (e.negated) {
        e.ranges.insert(e.ranges.end(), unsafe.begin(), unsafe.end());
        return e;
      }
      std::vector<std::pair<char32_t, char32_t>> kept;
      for (auto [lo, hi] : e.ranges) {
        for (auto [ulo, uhi] : unsafe) {
          if (lo > hi) break;
          if (uhi < lo || ulo > hi) continue;
          if (ulo > lo) kept.emplace_back(lo, ulo - 1);
          lo = uhi + 1;
        }
        if (lo <= hi) kept.emplace_back(lo, hi);
      }
      std::sort(kept.begin(), kept.end());
      e.ranges = std::move(kept);
      if (e.ranges.empty()) RS_FAIL("the pattern's class matches only characters JSON strings must escape");
      return e;
    }
    default:
      for (Expr& child : e.children) child = json_safe(std::move(child));
      return e;
  }
}

class SchemaCompiler {
 public:
  SchemaCompiler(const json& document, RuleSet& rules, std::string prefix)
      : document_(document), rules_(rules), prefix_(std::move(prefix)) {
    add_json_value_rules(rules_);
  }

  Expr run() { return value(document_, "#"); }

 private:
  [[noreturn]] static void fail(const std::string& path, const std::string& message) {
    throw Error(fmt::format("invalid JSON schema at {}: {}", path, message));
  }

  std::string new_rule(Expr body, const std::string& hint) {
    const std::string name = fmt::format("{}{}-{}", prefix_, hint, ++counter_);
    rules_.add(name, std::move(body));
    return name;
  }

  static std::string ws() { return "ws"; }

  Expr value(const json& schema, const std::string& path) {
    if (schema.is_boolean()) {
      if (!schema.get<bool>()) fail(path, "the schema 'false' accepts nothing");
      return Expr::ref("json-value");
    }
    if (!schema.is_object()) fail(path, "a schema must be an object or a boolean");
    for (const auto& [key, v] : schema.items())
      if (kUnsupported.contains(key)) fail(path, fmt::format("the keyword '{}' is not supported", key));
    if (schema.contains("$ref")) return reference(schema, path);
    if (schema.contains("allOf")) return value(merge_all_of(schema, path), path);
    if (schema.contains("const")) return Expr::bytes(literal(schema["const"]));
    if (schema.contains("enum")) {
      const json& values = schema["enum"];
      if (!values.is_array() || values.empty()) fail(path + "/enum", "enum must be a non-empty array");
      std::vector<Expr> options;
      for (const json& v : values) options.push_back(Expr::bytes(literal(v)));
      return Expr::alt(std::move(options));
    }
    // oneOf is enforced as anyOf: an output matches at least one branch, but one matching several is not refused
    // (a grammar cannot count matches; the schemas APIs write have disjoint branches, told apart by a const or type).
    for (const char* key : {"anyOf", "oneOf"}) {
      if (!schema.contains(key)) continue;
      const json& subs = schema[key];
      if (!subs.is_array() || subs.empty()) fail(path + "/" + key, "must be a non-empty array");
      json base = schema;
      base.erase(key);
      std::vector<Expr> options;
      for (size_t i = 0; i < subs.size(); ++i) {
        json merged = subs[i];
        if (merged.is_object())  // sibling keywords apply to every branch
          for (const auto& [k, v] : base.items())
            if (!merged.contains(k)) merged[k] = v;
        options.push_back(value(merged, fmt::format("{}/{}/{}", path, key, i)));
      }
      return Expr::alt(std::move(options));
    }
    std::vector<std::string> types;
    if (schema.contains("type")) {
      const json& type = schema["type"];
      if (type.is_string()) {
        types.push_back(type.get<std::string>());
      } else if (type.is_array() && !type.empty()) {
        for (const json& t : type) {
          if (!t.is_string()) fail(path + "/type", "type must be a string or an array of strings");
          types.push_back(t.get<std::string>());
        }
      } else {
        fail(path + "/type", "type must be a string or an array of strings");
      }
    } else if (schema.contains("properties") || schema.contains("additionalProperties") ||
               schema.contains("required")) {
      types.push_back("object");
    } else if (schema.contains("items") || schema.contains("prefixItems")) {
      types.push_back("array");
    } else if (schema.contains("minLength") || schema.contains("maxLength") || schema.contains("pattern") ||
               schema.contains("format")) {
      types.push_back("string");
    } else {
      return Expr::ref("json-value");
    }
    std::vector<Expr> options;
    for (const std::string& type : types) options.push_back(typed(schema, type, path));
    return options.size() == 1 ? std::move(options[0]) : Expr::alt(std::move(options));
  }

  Expr typed(const json& schema, const std::string& type, const std::string& path) {
    if (type == "string") return string(schema, path);
    if (type == "integer") return integer(schema, path);
    if (type == "number") return number(schema, path);
    if (type == "boolean") return Expr::ref("json-boolean");
    if (type == "null") return Expr::ref("json-null");
    if (type == "object") return object(schema, path);
    if (type == "array") return array(schema, path);
    fail(path + "/type", fmt::format("unknown type '{}'", type));
  }

  const json* resolve(const std::string& ref, const std::string& path) {
    if (ref.empty() || ref[0] != '#')
      fail(path, fmt::format("only local references (#/...) are supported, not '{}'", ref));
    try {
      const json::json_pointer pointer(ref.substr(1));
      if (!document_.contains(pointer)) fail(path, fmt::format("the reference '{}' points nowhere", ref));
      return &document_.at(pointer);
    } catch (const json::exception&) {
      fail(path, fmt::format("the reference '{}' is not a valid JSON pointer", ref));
    }
  }

  Expr reference(const json& schema, const std::string& path) {
    if (!schema["$ref"].is_string()) fail(path + "/$ref", "$ref must be a string");
    const std::string ref = schema["$ref"].get<std::string>();
    const auto known = ref_rules_.find(ref);
    if (known != ref_rules_.end()) return Expr::ref(known->second);
    const json* target = resolve(ref, path);
    // Named before it is compiled, so recursive schemas refer to themselves.
    const std::string name = fmt::format("{}ref-{}", prefix_, ++counter_);
    ref_rules_[ref] = name;
    rules_.add(name, value(*target, ref));
    return Expr::ref(name);
  }

  json merge_all_of(const json& schema, const std::string& path) {
    const json& subs = schema["allOf"];
    if (!subs.is_array() || subs.empty()) fail(path + "/allOf", "must be a non-empty array");
    json merged = schema;
    merged.erase("allOf");
    for (size_t i = 0; i < subs.size(); ++i) {
      json sub = subs[i];
      const std::string sub_path = fmt::format("{}/allOf/{}", path, i);
      while (sub.is_object() && sub.contains("$ref")) {
        json rest = sub;
        rest.erase("$ref");
        sub = *resolve(sub["$ref"].get<std::string>(), sub_path);
        for (const auto& [k, v] : rest.items()) sub[k] = v;
      }
      if (!sub.is_object()) fail(sub_path, "allOf members must be schema objects");
      for (const auto& [key, v] : sub.items()) {
        if (key == "properties") {
          for (const auto& [name, prop] : v.items()) merged["properties"][name] = prop;
        } else if (key == "required") {
          for (const json& name : v) merged["required"].push_back(name);
        } else if (!merged.contains(key)) {
          merged[key] = v;
        } else if (merged[key] != v) {
          fail(sub_path, fmt::format("allOf members disagree on '{}' (only properties and required are merged)", key));
        }
      }
    }
    return merged;
  }

  static std::optional<int64_t> length_bound(const json& schema, const char* key, const std::string& path) {
    if (!schema.contains(key)) return std::nullopt;
    const json& v = schema[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 0) fail(path + "/" + key, "must be a non-negative integer");
    return v.get<int64_t>();
  }

  Expr string(const json& schema, const std::string& path) {
    const bool known_format = schema.contains("format") && schema["format"].is_string() &&
                              kFormats.contains(schema["format"].get<std::string>());
    if (schema.contains("pattern") || known_format) {
      std::string pattern;
      bool anchored_start = true, anchored_end = true;
      if (schema.contains("pattern")) {
        if (!schema["pattern"].is_string()) fail(path + "/pattern", "must be a string");
        pattern = schema["pattern"].get<std::string>();
        // JSON Schema patterns are unanchored: without ^ or $ anything may come before or after the match.
        anchored_start = pattern.starts_with("^");
        anchored_end = pattern.ends_with("$") && !pattern.ends_with("\\$");
      } else {
        pattern = kFormats.at(schema["format"].get<std::string>());
      }
      if (schema.contains("minLength") || schema.contains("maxLength"))
        fail(path, "minLength/maxLength together with a pattern or format are not supported");
      try {
        const Expr anything = Expr::repeat(Expr::char_class({}, true), 0, -1);
        Expr body = parse_regex(pattern);
        if (!anchored_start || !anchored_end)
          body = Expr::seq(
              {anchored_start ? Expr::empty() : anything, std::move(body), anchored_end ? Expr::empty() : anything});
        return Expr::seq({Expr::bytes("\""), json_safe(std::move(body)), Expr::bytes("\"")});
      } catch (const Error& e) {
        fail(path + "/pattern", e.what());
      }
    }
    const auto min = length_bound(schema, "minLength", path), max = length_bound(schema, "maxLength", path);
    if (!min && !max) return Expr::ref("json-string");
    if (min && max && *max < *min) fail(path, "maxLength is below minLength");
    if (min.value_or(0) > 10000 || max.value_or(0) > 10000) fail(path, "string lengths above 10000 are not supported");
    return Expr::seq({Expr::bytes("\""),
                      Expr::repeat(Expr::ref("json-char"), static_cast<int32_t>(min.value_or(0)),
                                   max ? static_cast<int32_t>(*max) : -1),
                      Expr::bytes("\"")});
  }

  Expr integer(const json& schema, const std::string& path) {
    auto bounded = bounded_integer(schema, path);
    return bounded ? Expr::ref(new_rule(std::move(*bounded), "int")) : Expr::ref("json-integer");
  }

  Expr number(const json& schema, const std::string& path) {
    auto bounded = bounded_number(schema, path);
    return bounded ? Expr::ref(new_rule(std::move(*bounded), "num")) : Expr::ref("json-number");
  }

  Expr object(const json& schema, const std::string& path) {
    const json empty = json::object();
    const json& properties = schema.contains("properties") ? schema["properties"] : empty;
    if (!properties.is_object()) fail(path + "/properties", "must be an object");
    std::set<std::string> required;
    if (schema.contains("required")) {
      if (!schema["required"].is_array()) fail(path + "/required", "must be an array of strings");
      for (const json& name : schema["required"]) {
        if (!name.is_string()) fail(path + "/required", "must be an array of strings");
        required.insert(name.get<std::string>());
      }
    }
    const json additional = schema.contains("additionalProperties") ? schema["additionalProperties"] : json(false);
    if (!additional.is_boolean() && !additional.is_object())
      fail(path + "/additionalProperties", "must be a boolean or a schema");
    const bool allow_extra = !(additional.is_boolean() && !additional.get<bool>());

    struct Member {
      Expr expr;
      bool required;
    };
    std::vector<Member> members;
    for (const auto& [name, prop] : properties.items()) {
      const std::string prop_path = path + "/properties/" + name;
      members.push_back({Expr::seq({Expr::bytes(literal(json(name))), Expr::ref(ws()), Expr::bytes(":"),
                                    Expr::ref(ws()), value(prop, prop_path)}),
                         required.contains(name)});
    }
    for (const std::string& name : required) {
      if (properties.contains(name)) continue;
      if (!allow_extra) fail(path + "/required", fmt::format("'{}' is required but not allowed", name));
      members.push_back({Expr::seq({Expr::bytes(literal(json(name))), Expr::ref(ws()), Expr::bytes(":"),
                                    Expr::ref(ws()), value(additional, path + "/additionalProperties")}),
                         true});
    }
    std::optional<Expr> extra;
    if (allow_extra)
      extra = Expr::seq({Expr::ref("json-string"), Expr::ref(ws()), Expr::bytes(":"), Expr::ref(ws()),
                         value(additional, path + "/additionalProperties")});
    // rest_i: members i.. after something was written (each preceded by a comma); first_i: nothing written yet.
    const size_t n = members.size();
    const auto comma = [&](Expr e) {
      return Expr::seq({Expr::bytes(","), Expr::ref(ws()), std::move(e), Expr::ref(ws())});
    };
    std::string rest = new_rule(extra ? Expr::repeat(comma(*extra), 0, -1) : Expr::empty(), "obj-rest");
    std::string first = new_rule(
        extra ? Expr::repeat(Expr::seq({*extra, Expr::ref(ws()), Expr::ref(rest)}), 0, 1) : Expr::empty(), "obj-first");
    for (size_t i = n; i-- > 0;) {
      const Member& m = members[i];
      const std::string next_rest = rest;
      rest = new_rule(m.required ? Expr::seq({comma(m.expr), Expr::ref(next_rest)})
                                 : Expr::seq({Expr::repeat(comma(m.expr), 0, 1), Expr::ref(next_rest)}),
                      "obj-rest");
      Expr here = Expr::seq({m.expr, Expr::ref(ws()), Expr::ref(next_rest)});
      first = new_rule(m.required ? std::move(here) : Expr::alt({std::move(here), Expr::ref(first)}), "obj-first");
    }
    return Expr::ref(
        new_rule(Expr::seq({Expr::bytes("{"), Expr::ref(ws()), Expr::ref(first), Expr::bytes("}")}), "obj"));
  }

  Expr array(const json& schema, const std::string& path) {
    const auto min = length_bound(schema, "minItems", path), max = length_bound(schema, "maxItems", path);
    if (min && max && *max < *min) fail(path, "maxItems is below minItems");
    if (min.value_or(0) > 1000 || max.value_or(0) > 1000) fail(path, "item counts above 1000 are not supported");
    if (schema.contains("uniqueItems") && schema["uniqueItems"] == true)
      fail(path, "the keyword 'uniqueItems' is not supported");
    std::vector<Expr> prefix;
    if (schema.contains("prefixItems")) {
      if (!schema["prefixItems"].is_array()) fail(path + "/prefixItems", "must be an array");
      for (size_t i = 0; i < schema["prefixItems"].size(); ++i)
        prefix.push_back(value(schema["prefixItems"][i], fmt::format("{}/prefixItems/{}", path, i)));
    }
    const json items = schema.contains("items") ? schema["items"] : json(true);
    const bool more = !(items.is_boolean() && !items.get<bool>());
    const Expr item = more ? Expr::ref(new_rule(value(items, path + "/items"), "item")) : Expr::empty();
    const int32_t lo = static_cast<int32_t>(min.value_or(0));
    const int32_t hi = max ? static_cast<int32_t>(*max) : -1;
    const auto comma = [&](Expr e) {
      return Expr::seq({Expr::bytes(","), Expr::ref(ws()), std::move(e), Expr::ref(ws())});
    };
    if (!prefix.empty()) {
      // The tuple members in order, then items; counts apply to the whole array.
      const int32_t k = static_cast<int32_t>(prefix.size());
      if (hi >= 0 && hi < k) fail(path, "maxItems is below the number of prefixItems");
      if (lo > k && !more) fail(path, "minItems needs more items than prefixItems allows");
      Expr body = Expr::seq({prefix[0], Expr::ref(ws())});
      for (int32_t i = 1; i < k; ++i) body.children.push_back(comma(prefix[i]));
      if (more) body.children.push_back(Expr::repeat(comma(item), std::max(lo - k, 0), hi < 0 ? -1 : hi - k));
      // The tuple's items may stop early only when minItems allows it; keep it simple: all prefix items are present
      // unless the array may be empty.
      Expr inner = lo == 0 ? Expr::repeat(std::move(body), 0, 1) : std::move(body);
      return Expr::ref(
          new_rule(Expr::seq({Expr::bytes("["), Expr::ref(ws()), std::move(inner), Expr::bytes("]")}), "arr"));
    }
    if (!more) {
      if (lo > 0) fail(path, "items is false but minItems is above 0");
      return Expr::seq({Expr::bytes("["), Expr::ref(ws()), Expr::bytes("]")});
    }
    Expr body = Expr::seq(
        {item, Expr::ref(ws()), Expr::repeat(comma(item), std::max(lo - 1, 0), hi < 0 ? -1 : std::max(hi - 1, 0))});
    Expr inner = lo == 0 ? Expr::repeat(std::move(body), 0, 1) : std::move(body);
    if (hi == 0) inner = Expr::empty();
    return Expr::ref(
        new_rule(Expr::seq({Expr::bytes("["), Expr::ref(ws()), std::move(inner), Expr::bytes("]")}), "arr"));
  }

  const json& document_;
  RuleSet& rules_;
  std::string prefix_;
  std::map<std::string, std::string> ref_rules_;
  int counter_ = 0;
};

}  // namespace

Expr add_json_schema(RuleSet& rules, const json& schema, const std::string& prefix) {
  return SchemaCompiler(schema, rules, prefix).run();
}

RuleSet json_schema_rules(const json& schema) {
  RuleSet rules;
  Expr root = add_json_schema(rules, schema, "");
  rules.add("root", std::move(root));
  return rules;
}

}  // namespace rs::grammar
