// Python formatting: float repr, str repr, json.dumps (transformers' tojson).
#include "chat/python_format.h"

#include <gtest/gtest.h>

#include <limits>

namespace rs::chat {
namespace {

TEST(PythonFormatTest, FloatReprMatchesPython) {
  EXPECT_EQ(python_float_repr(1.0), "1.0");
  EXPECT_EQ(python_float_repr(0.1), "0.1");
  EXPECT_EQ(python_float_repr(-2.5), "-2.5");
  EXPECT_EQ(python_float_repr(1e16), "1e+16");
  EXPECT_EQ(python_float_repr(1234567890123456.0), "1234567890123456.0");
  EXPECT_EQ(python_float_repr(123456789012345678.0), "1.2345678901234568e+17");
  EXPECT_EQ(python_float_repr(0.0001), "0.0001");
  EXPECT_EQ(python_float_repr(0.00001), "1e-05");
  EXPECT_EQ(python_float_repr(1.5e-7), "1.5e-07");
  EXPECT_EQ(python_float_repr(1e100), "1e+100");
  EXPECT_EQ(python_float_repr(-0.0), "-0.0");
  EXPECT_EQ(python_float_repr(std::numeric_limits<double>::infinity()), "inf");
}

TEST(PythonFormatTest, StringReprPicksQuotes) {
  EXPECT_EQ(python_string_repr("abc"), "'abc'");
  EXPECT_EQ(python_string_repr("it's"), "\"it's\"");
  EXPECT_EQ(python_string_repr("'\""), "'\\'\"'");
  EXPECT_EQ(python_string_repr("a\nb\\\x01é"), "'a\\nb\\\\\\x01é'");
}

TEST(PythonFormatTest, JsonDumpsDefaults) {
  const auto json = nlohmann::ordered_json::parse(R"({"b": [1, 2.5, true, null], "a": {"é": "x\"\n\u001f"}})");
  EXPECT_EQ(python_json_dumps(json, {}), R"({"b": [1, 2.5, true, null], "a": {"é": "x\"\n\u001f"}})");
}

TEST(PythonFormatTest, JsonDumpsIndentSortAndAscii) {
  const auto json = nlohmann::ordered_json::parse(R"({"b": [1, {}], "a": [], "c": "é"})");
  JsonDumpOptions options;
  options.indent = "  ";
  options.item_separator = ",";
  EXPECT_EQ(python_json_dumps(json, options), "{\n  \"b\": [\n    1,\n    {}\n  ],\n  \"a\": [],\n  \"c\": \"é\"\n}");
  JsonDumpOptions sorted;
  sorted.sort_keys = true;
  sorted.ensure_ascii = true;
  EXPECT_EQ(python_json_dumps(json, sorted), R"({"a": [], "b": [1, {}], "c": "\u00e9"})");
  EXPECT_EQ(python_json_dumps(nlohmann::ordered_json("😀"), sorted), R"("\ud83d\ude00")");
}

}  // namespace
}  // namespace rs::chat
