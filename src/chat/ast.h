// Jinja syntax tree: expressions and statements produced by the parser and walked by the evaluator.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "chat/template_error.h"
#include "chat/value.h"

namespace rs::chat {

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using Body = std::vector<Stmt>;

// Arguments written at a call site: f(a, b, key=c, *rest, **more).
struct ArgsExpr {
  std::vector<ExprPtr> positional;
  std::vector<std::pair<std::string, ExprPtr>> keyword;
  ExprPtr star_args;    // may be null
  ExprPtr star_kwargs;  // may be null
};

struct LiteralExpr {
  Value value;  // string, number, bool or none
};
struct NameExpr {
  std::string name;
};
struct ListExpr {
  std::vector<ExprPtr> items;
  bool is_tuple = false;
};
struct DictExpr {
  std::vector<std::pair<ExprPtr, ExprPtr>> items;
};
struct AttributeExpr {  // object.name
  ExprPtr object;
  std::string name;
};
struct SubscriptExpr {  // object[index]
  ExprPtr object;
  ExprPtr index;
};
struct SliceExpr {  // object[start:stop:step]; absent parts are null
  ExprPtr object;
  ExprPtr start;
  ExprPtr stop;
  ExprPtr step;
};
struct CallExpr {
  ExprPtr callee;
  ArgsExpr args;
};
struct FilterExpr {  // input | name(args); input is null inside filter blocks ({% filter %}, {% set x | f %})
  ExprPtr input;
  std::string name;
  ArgsExpr args;
};
struct TestExpr {  // input is [not] name(args)
  ExprPtr input;
  std::string name;
  ArgsExpr args;
  bool negated = false;
};
struct UnaryExpr {  // "not", "-", "+"
  std::string op;
  ExprPtr operand;
};
struct BinaryExpr {  // "+", "-", "*", "/", "//", "%", "**", "~", "and", "or"
  std::string op;
  ExprPtr lhs;
  ExprPtr rhs;
};
struct CompareExpr {  // first op1 e1 op2 e2 ... (chained, as in Python); ops: == != < <= > >= in notin
  ExprPtr first;
  std::vector<std::pair<std::string, ExprPtr>> rest;
};
struct ConditionalExpr {  // then_value if condition else else_value (else_value may be null: undefined)
  ExprPtr then_value;
  ExprPtr condition;
  ExprPtr else_value;
};

struct Expr {
  SourcePos pos;
  std::variant<LiteralExpr, NameExpr, ListExpr, DictExpr, AttributeExpr, SubscriptExpr, SliceExpr, CallExpr, FilterExpr,
               TestExpr, UnaryExpr, BinaryExpr, CompareExpr, ConditionalExpr>
      node;
};

// Left side of set/for/with: one name, a tuple of names, or a namespace attribute (ns.attr).
struct AssignTarget {
  std::vector<std::string> names;
  std::string attribute;  // non-empty: names[0] is a namespace, assign names[0].attribute
  bool is_tuple = false;
};

struct Param {
  std::string name;
  ExprPtr default_value;  // may be null
};

struct TextStmt {
  std::string text;
};
struct OutputStmt {  // {{ expr }}
  ExprPtr expr;
};
struct IfStmt {
  std::vector<std::pair<ExprPtr, Body>> branches;  // if, elif...
  Body else_body;
};
struct ForStmt {
  AssignTarget target;
  ExprPtr iterable;
  ExprPtr filter;  // for x in y if filter; may be null
  Body body;
  Body else_body;
};
struct SetStmt {
  AssignTarget target;
  ExprPtr value;
};
struct SetBlockStmt {  // {% set x | filters %}body{% endset %}
  AssignTarget target;
  ExprPtr filter;  // may be null; its innermost input is null (the body)
  Body body;
};
struct MacroStmt {
  std::string name;
  std::vector<Param> params;
  Body body;
};
struct CallBlockStmt {  // {% call(caller_params) macro(args) %}body{% endcall %}
  std::vector<Param> caller_params;
  ExprPtr call;
  Body body;
};
struct FilterBlockStmt {
  ExprPtr filter;  // innermost input is null (the body)
  Body body;
};
struct WithStmt {
  std::vector<std::pair<AssignTarget, ExprPtr>> assignments;
  Body body;
};
struct LoopControlStmt {
  bool is_break = false;
};
struct GenerationStmt {  // transformers' {% generation %} marker: renders its body
  Body body;
};

struct Stmt {
  SourcePos pos;
  std::variant<TextStmt, OutputStmt, IfStmt, ForStmt, SetStmt, SetBlockStmt, MacroStmt, CallBlockStmt, FilterBlockStmt,
               WithStmt, LoopControlStmt, GenerationStmt>
      node;
};

}  // namespace rs::chat
