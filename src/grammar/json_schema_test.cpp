#include "grammar/json_schema.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "grammar/int_range.h"
#include "grammar/test_util.h"

namespace rs::grammar {
namespace {

using json = nlohmann::ordered_json;

std::shared_ptr<const CompiledGrammar> schema_grammar(const std::string& schema) {
  return testing::compile_for_test(json_schema_rules(json::parse(schema)));
}

std::string error_of(const std::string& schema) {
  try {
    schema_grammar(schema);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(JsonSchema, ObjectsWithRequiredAndOptionalProperties) {
  const auto g = schema_grammar(R"({"type": "object", "properties": {
      "name": {"type": "string"}, "age": {"type": "integer"}, "tags": {"type": "array", "items": {"type": "string"}}},
      "required": ["name"]})");
  EXPECT_TRUE(testing::fullmatch(g, R"({"name": "Ann"})"));
  EXPECT_TRUE(testing::fullmatch(g, R"({"name":"Ann","age":3})"));
  EXPECT_TRUE(testing::fullmatch(g, R"({"name": "A\"n\u00e9", "tags": ["x", "y"]})"));
  EXPECT_TRUE(testing::fullmatch(g, "{\n  \"name\": \"Ann\",\n  \"age\": -12\n}"));
  EXPECT_FALSE(testing::fullmatch(g, R"({"age": 3})"));               // name is required
  EXPECT_FALSE(testing::fullmatch(g, R"({"name": "Ann", "x": 1})"));  // no additional properties
  EXPECT_FALSE(testing::fullmatch(g, R"({"name": "Ann",})"));
  EXPECT_FALSE(testing::fullmatch(g, R"({"name": 5})"));
  EXPECT_FALSE(testing::fullmatch(g, R"({"name": "a)"
                                     "\n"
                                     R"("})"));  // raw control character
  EXPECT_FALSE(testing::fullmatch(g, R"({"name": "Ann", "age": 1.5})"));
  EXPECT_FALSE(testing::fullmatch(g, R"({"name": "Ann", "age": 012})"));
}

TEST(JsonSchema, OptionalPropertiesBeforeRequiredOnes) {
  const auto g = schema_grammar(R"({"properties": {"a": {"type": "boolean"}, "b": {"type": "null"},
      "c": {"const": 1}}, "required": ["c"]})");
  EXPECT_TRUE(testing::fullmatch(g, R"({"c": 1})"));
  EXPECT_TRUE(testing::fullmatch(g, R"({"a": true, "c": 1})"));
  EXPECT_TRUE(testing::fullmatch(g, R"({"b": null, "c": 1})"));
  EXPECT_TRUE(testing::fullmatch(g, R"({"a": false, "b": null, "c": 1})"));
  EXPECT_FALSE(testing::fullmatch(g, R"({"a": false, "b": null})"));
  EXPECT_FALSE(testing::fullmatch(g, R"({"c": 2})"));
}

TEST(JsonSchema, AdditionalPropertiesSchema) {
  const auto g = schema_grammar(R"({"type": "object", "additionalProperties": {"type": "number"}})");
  EXPECT_TRUE(testing::fullmatch(g, R"({})"));
  EXPECT_TRUE(testing::fullmatch(g, R"({"x": 1, "y": 2.5e-3, "z": -1E+99})"));
  EXPECT_FALSE(testing::fullmatch(g, R"({"x": 1e999})"));  // valid JSON, but no finite double
  EXPECT_FALSE(testing::fullmatch(g, R"({"x": "1"})"));
}

TEST(JsonSchema, EnumsAnyOfRefsAndRecursion) {
  const auto g = schema_grammar(R"({"$defs": {"node": {"type": "object", "properties": {
      "value": {"enum": ["a", 1, null, {"k": [true]}]},
      "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}}, "required": ["value"]}},
      "anyOf": [{"$ref": "#/$defs/node"}, {"type": "string", "maxLength": 2}]})");
  EXPECT_TRUE(testing::fullmatch(g, R"({"value": "a"})"));
  EXPECT_TRUE(testing::fullmatch(g, R"({"value": {"k":[true]}, "children": [{"value": 1, "children": []}]})"));
  EXPECT_TRUE(testing::fullmatch(g, R"("ab")"));
  EXPECT_FALSE(testing::fullmatch(g, R"("abc")"));
  EXPECT_FALSE(testing::fullmatch(g, R"({"value": "b"})"));
}

TEST(JsonSchema, ArraysCountItems) {
  const auto g = schema_grammar(R"({"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 3})");
  EXPECT_FALSE(testing::fullmatch(g, "[1]"));
  EXPECT_TRUE(testing::fullmatch(g, "[1, 2]"));
  EXPECT_TRUE(testing::fullmatch(g, "[1,2,3]"));
  EXPECT_FALSE(testing::fullmatch(g, "[1,2,3,4]"));
  const auto tuple = schema_grammar(R"({"prefixItems": [{"type": "string"}, {"type": "number"}], "items": false})");
  EXPECT_TRUE(testing::fullmatch(tuple, R"(["a", 1])"));
  EXPECT_FALSE(testing::fullmatch(tuple, R"(["a", 1, 2])"));
}

TEST(JsonSchema, StringFormatsAndPatterns) {
  const auto date = schema_grammar(R"({"type": "string", "format": "date"})");
  EXPECT_TRUE(testing::fullmatch(date, R"("2024-02-29")"));
  EXPECT_FALSE(testing::fullmatch(date, R"("2024-13-01")"));
  const auto uuid = schema_grammar(R"({"type": "string", "format": "uuid"})");
  EXPECT_TRUE(testing::fullmatch(uuid, R"("123e4567-e89b-12d3-a456-426614174000")"));
  const auto code = schema_grammar(R"({"type": "string", "pattern": "^[A-Z]{3}-\\d+$"})");
  EXPECT_TRUE(testing::fullmatch(code, R"("ABC-12")"));
  EXPECT_FALSE(testing::fullmatch(code, R"("AB-12")"));
  const auto contains = schema_grammar(R"({"type": "string", "pattern": "ok"})");  // unanchored
  EXPECT_TRUE(testing::fullmatch(contains, R"("it is ok here")"));
  EXPECT_FALSE(testing::fullmatch(contains, R"("no")"));
  const auto quoted = schema_grammar(R"({"type": "string", "pattern": "^a\"b.$"})");
  EXPECT_TRUE(testing::fullmatch(quoted, R"("a\"bc")"));
  EXPECT_FALSE(testing::fullmatch(quoted, "\"a\\\"b\"\""));  // '.' never produces a raw quote
}

TEST(JsonSchema, IntegerRangesMatchExactlyTheirMembers) {
  const std::pair<std::optional<int64_t>, std::optional<int64_t>> ranges[] = {
      {0, 150}, {-40, 7}, {-105, -3}, {13, 999}, {1, std::nullopt}, {std::nullopt, -2}, {100, 100}};
  for (const auto& [lo, hi] : ranges) {
    RuleSet rules;
    rules.add("root", integer_range(lo, hi));
    const auto g = testing::compile_for_test(rules);
    for (int64_t v = -1200; v <= 1200; ++v) {
      const bool inside = (!lo || v >= *lo) && (!hi || v <= *hi);
      ASSERT_EQ(testing::fullmatch(g, std::to_string(v)), inside) << v;
    }
    EXPECT_FALSE(testing::fullmatch(g, "007"));
    EXPECT_FALSE(testing::fullmatch(g, "-0"));
  }
}

TEST(JsonSchema, NumberBounds) {
  const auto g = schema_grammar(R"({"type": "number", "minimum": 1, "maximum": 5})");
  for (const char* ok : {"1", "1.5", "4.999", "5", "5.00"}) EXPECT_TRUE(testing::fullmatch(g, ok)) << ok;
  for (const char* bad : {"0.5", "5.01", "6", "-1", "1e3"}) EXPECT_FALSE(testing::fullmatch(g, bad)) << bad;
}

TEST(JsonSchema, FractionalNumberBoundsAreTheDecimalsWritten) {
  const auto tenth = schema_grammar(R"({"type": "number", "minimum": 0.1, "maximum": 0.30000000000000004})");
  for (const char* ok : {"0.1", "0.10", "0.1000001", "0.2", "0.3", "0.30000000000000004"})
    EXPECT_TRUE(testing::fullmatch(tenth, ok)) << ok;
  for (const char* bad : {"0.09999", "0.0", "0", "0.30000000000000005", "0.31", "1", "-0.1"})
    EXPECT_FALSE(testing::fullmatch(tenth, bad)) << bad;
  const auto tiny = schema_grammar(R"({"type": "number", "exclusiveMaximum": 1e-7})");
  for (const char* ok : {"0.00000009", "0", "0.0", "-5", "-0.5"}) EXPECT_TRUE(testing::fullmatch(tiny, ok)) << ok;
  for (const char* bad : {"0.0000001", "0.00000010", "0.000001", "1"})
    EXPECT_FALSE(testing::fullmatch(tiny, bad)) << bad;
}

// Every bound combination against the numeric comparison, over signed decimals around the bounds.
TEST(JsonSchema, NumberBoundsMatchExactlyTheirMembers) {
  std::vector<std::string> texts;
  for (int whole = 0; whole <= 14; ++whole)
    for (const char* fraction :
         {"", ".0", ".00", ".5", ".05", ".001", ".999", ".25", ".125", ".2", ".249", ".251", ".0001", ".75", ".7"})
      for (const char* sign : {"", "-"})
        if (!(sign[0] == '-' && whole == 0 && std::string(fraction).find_first_not_of(".0") == std::string::npos))
          texts.push_back(sign + std::to_string(whole) + fraction);  // "-0" and "-0.0" are left out: they are 0
  const char* schemas[] = {
      R"({"type": "number", "minimum": 0})",
      R"({"type": "number", "exclusiveMinimum": 0})",
      R"({"type": "number", "maximum": 3})",
      R"({"type": "number", "exclusiveMaximum": -2})",
      R"({"type": "number", "minimum": -7, "maximum": 7})",
      R"({"type": "number", "exclusiveMinimum": -7, "exclusiveMaximum": 7})",
      R"({"type": "number", "minimum": -12, "exclusiveMaximum": -3})",
      R"({"type": "number", "exclusiveMinimum": 4, "maximum": 5})",
      R"({"type": "number", "minimum": 2, "exclusiveMinimum": 3, "maximum": 9, "exclusiveMaximum": 12})",
      R"({"type": "number", "minimum": 6, "exclusiveMinimum": true})",  // draft 4
      R"({"type": "number", "minimum": 5, "maximum": 5})",
      R"({"type": "number", "minimum": 0.25})",
      R"({"type": "number", "exclusiveMinimum": 0.25})",
      R"({"type": "number", "maximum": 2.5})",
      R"({"type": "number", "exclusiveMaximum": -0.125})",
      R"({"type": "number", "minimum": -2.75, "maximum": 3.05})",
      R"({"type": "number", "exclusiveMinimum": 1.2, "exclusiveMaximum": 1.25})",
      R"({"type": "number", "minimum": 1.2, "maximum": 1.2})",
      R"({"type": "number", "minimum": -0.5, "exclusiveMaximum": -0.25})",
      R"({"type": "number", "exclusiveMinimum": 0.001, "maximum": 0.999})",
      R"({"type": "number", "minimum": 0.0001})",
      R"({"type": "number", "minimum": 10.7, "exclusiveMaximum": 12.125})",
  };
  for (const char* text : schemas) {
    const json schema = json::parse(text);
    const auto g = testing::compile_for_test(json_schema_rules(schema));
    for (const std::string& number : texts) {
      const double v = std::stod(number);
      bool inside = true;
      if (schema.contains("minimum")) {
        const bool open = schema.value("exclusiveMinimum", json()) == true;
        inside = inside && (open ? v > schema["minimum"].get<double>() : v >= schema["minimum"].get<double>());
      }
      if (schema.contains("exclusiveMinimum") && schema["exclusiveMinimum"].is_number())
        inside = inside && v > schema["exclusiveMinimum"].get<double>();
      if (schema.contains("maximum")) inside = inside && v <= schema["maximum"].get<double>();
      if (schema.contains("exclusiveMaximum")) inside = inside && v < schema["exclusiveMaximum"].get<double>();
      EXPECT_EQ(testing::fullmatch(g, number), inside) << text << " " << number;
    }
    EXPECT_FALSE(testing::fullmatch(g, "5e0")) << text;  // bounded numbers carry no exponent
  }
}

TEST(JsonSchema, IntegerBoundsExclusiveAndFractional) {
  const auto open = schema_grammar(R"({"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 10})");
  const auto rounded = schema_grammar(R"({"type": "integer", "minimum": 0.5, "maximum": 9.5})");
  const auto draft4 = schema_grammar(R"({"type": "integer", "minimum": 0, "exclusiveMinimum": true, "maximum": 9})");
  for (int v = -3; v <= 13; ++v) {
    const bool inside = v >= 1 && v <= 9;
    EXPECT_EQ(testing::fullmatch(open, std::to_string(v)), inside) << v;
    EXPECT_EQ(testing::fullmatch(rounded, std::to_string(v)), inside) << v;
    EXPECT_EQ(testing::fullmatch(draft4, std::to_string(v)), inside) << v;
  }
  EXPECT_FALSE(testing::fullmatch(open, "5.0"));
}

TEST(JsonSchema, OneOfIsEnforcedAsAnyOf) {
  const auto g = schema_grammar(R"({"oneOf": [
      {"type": "object", "properties": {"kind": {"const": "circle"}, "r": {"type": "number", "minimum": 0}},
       "required": ["kind", "r"]},
      {"type": "object", "properties": {"kind": {"const": "square"}, "side": {"type": "integer", "minimum": 1}},
       "required": ["kind", "side"]},
      {"type": "integer"}, {"type": "number"}]})");
  EXPECT_TRUE(testing::fullmatch(g, R"({"kind": "circle", "r": 2.5})"));
  EXPECT_TRUE(testing::fullmatch(g, R"({"kind": "square", "side": 3})"));
  EXPECT_TRUE(testing::fullmatch(g, "7"));  // matches two branches: allowed, as anyOf would (documented)
  EXPECT_FALSE(testing::fullmatch(g, R"({"kind": "square", "r": 2})"));
  EXPECT_FALSE(testing::fullmatch(g, R"({"kind": "circle", "r": -1})"));
  EXPECT_FALSE(testing::fullmatch(g, R"("7")"));
}

TEST(JsonSchema, StringLengthsCountCharactersNotBytes) {
  const auto g = schema_grammar(R"({"type": "string", "minLength": 2, "maxLength": 3})");
  for (const char* ok : {R"("ab")", R"("abc")", R"("éü")", R"("a\"b")", R"("\u00e9x")", R"("日本語")"})
    EXPECT_TRUE(testing::fullmatch(g, ok)) << ok;
  for (const char* bad : {R"("")", R"("a")", R"("é")", R"("abcd")", R"("a\"bc")", R"("日本語x")"})
    EXPECT_FALSE(testing::fullmatch(g, bad)) << bad;
}

TEST(JsonSchema, ItemCountsWithPrefixItems) {
  const auto g = schema_grammar(R"({"type": "array", "prefixItems": [{"type": "boolean"}],
      "items": {"type": "integer"}, "minItems": 2, "maxItems": 3})");
  EXPECT_FALSE(testing::fullmatch(g, "[true]"));
  EXPECT_TRUE(testing::fullmatch(g, "[true, 1]"));
  EXPECT_TRUE(testing::fullmatch(g, "[false, 1, 2]"));
  EXPECT_FALSE(testing::fullmatch(g, "[false, 1, 2, 3]"));
  EXPECT_FALSE(testing::fullmatch(g, "[1, 2]"));
  const auto none = schema_grammar(R"({"type": "array", "maxItems": 0})");
  EXPECT_TRUE(testing::fullmatch(none, "[]"));
  EXPECT_FALSE(testing::fullmatch(none, "[1]"));
}

TEST(JsonSchema, ErrorsNameThePath) {
  EXPECT_EQ(error_of(R"({"type": "object", "properties": {"a": {"type": "strin"}}})"),
            "invalid JSON schema at #/properties/a/type: unknown type 'strin'");
  EXPECT_EQ(error_of(R"({"properties": {"a": {"not": {"type": "string"}}}})"),
            "invalid JSON schema at #/properties/a: the keyword 'not' is not supported");
  EXPECT_EQ(error_of(R"({"$ref": "#/$defs/missing"})"),
            "invalid JSON schema at #: the reference '#/$defs/missing' points nowhere");
  EXPECT_EQ(error_of(R"({"type": "array", "minItems": 3, "maxItems": 1})"),
            "invalid JSON schema at #: maxItems is below minItems");
  EXPECT_EQ(error_of(R"({"enum": []})"), "invalid JSON schema at #/enum: enum must be a non-empty array");
  EXPECT_EQ(error_of(R"({"type": "string", "pattern": "(a"})"),
            "invalid JSON schema at #/pattern: regex at line 1, column 1: unclosed '('");
  EXPECT_EQ(error_of(R"(7)"), "invalid JSON schema at #: a schema must be an object or a boolean");
  EXPECT_EQ(error_of(R"({"type": "integer", "minimum": 5, "exclusiveMaximum": 5})"),
            "invalid JSON schema at #: no integer satisfies the minimum and maximum");
  EXPECT_EQ(error_of(R"({"type": "number", "exclusiveMinimum": 2, "maximum": 2})"),
            "invalid JSON schema at #: no number satisfies the minimum and maximum");
  EXPECT_EQ(error_of(R"({"type": "number", "maximum": 1e-50})"),
            "invalid JSON schema at #: bounds with more than 40 fractional digits are not supported");
  EXPECT_EQ(error_of(R"({"type": "number", "minimum": 0.5, "exclusiveMaximum": 0.5})"),
            "invalid JSON schema at #: no number satisfies the minimum and maximum");
  EXPECT_EQ(error_of(R"({"type": "integer", "minimum": "1"})"), "invalid JSON schema at #/minimum: must be a number");
  EXPECT_EQ(error_of(R"({"type": "string", "minLength": 3, "maxLength": 2})"),
            "invalid JSON schema at #: maxLength is below minLength");
  EXPECT_EQ(error_of(R"({"type": "string", "minLength": -1})"),
            "invalid JSON schema at #/minLength: must be a non-negative integer");
  EXPECT_EQ(error_of(R"({"oneOf": []})"), "invalid JSON schema at #/oneOf: must be a non-empty array");
}

}  // namespace
}  // namespace rs::grammar
