// Jinja parser: tokens -> syntax tree, with jinja2's operator precedence and statement set
// (if/for/set/macro/call/filter/with/break/continue/generation).
#pragma once

#include <initializer_list>
#include <string_view>
#include <vector>

#include "chat/ast.h"
#include "chat/lexer.h"

namespace rs::chat {

// Parses a whole template. Throws TemplateError with line and column on syntax errors.
Body parse_template(std::string_view source);

// Recursive-descent parser over a token vector; statements in parser.cpp, expressions in parser_expr.cpp.
class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}
  Body parse();

 private:
  // Statements.
  Body parse_body(std::initializer_list<std::string_view> end_tags, std::string* found_end);
  Stmt parse_statement();
  Stmt parse_if(SourcePos pos);
  Stmt parse_for(SourcePos pos);
  Stmt parse_set(SourcePos pos);
  Stmt parse_macro(SourcePos pos);
  Stmt parse_call_block(SourcePos pos);
  Stmt parse_filter_block(SourcePos pos);
  Stmt parse_with(SourcePos pos);
  std::vector<Param> parse_params();
  AssignTarget parse_assign_target(bool allow_namespace);
  void expect_block_end();

  // Expressions.
  ExprPtr parse_tuple(bool with_condexpr, std::initializer_list<std::string_view> extra_end_names,
                      bool explicit_parentheses);
  ExprPtr parse_expression(bool with_condexpr = true);
  ExprPtr parse_condexpr();
  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr parse_math1();
  ExprPtr parse_concat();
  ExprPtr parse_math2();
  ExprPtr parse_pow();
  ExprPtr parse_unary(bool with_filter);
  ExprPtr parse_primary();
  ExprPtr parse_postfix(ExprPtr node);
  ExprPtr parse_filter_expr(ExprPtr node);
  ExprPtr parse_subscript(ExprPtr node);
  ExprPtr parse_subscribed();
  ExprPtr parse_filter(ExprPtr node, bool start_inline);
  ExprPtr parse_test(ExprPtr node);
  ArgsExpr parse_call_args();
  std::string parse_dotted_name();

  // Token stream.
  const Token& current() const { return tokens_[index_]; }
  const Token& peek(size_t ahead = 1) const;
  const Token& advance();
  bool at_operator(std::string_view op) const;
  bool at_name(std::string_view name) const;
  bool skip_operator(std::string_view op);
  bool skip_name(std::string_view name);
  void expect_operator(std::string_view op);
  const Token& expect_kind(TokenKind kind, std::string_view what);
  [[noreturn]] void fail(const Token& token, const std::string& message) const;
  static std::string describe(const Token& token);

  std::vector<Token> tokens_;
  size_t index_ = 0;
};

}  // namespace rs::chat
