// Jinja statement parser and token-stream helpers.
#include "chat/parser.h"

#include <fmt/format.h>

#include <algorithm>

namespace rs::chat {

Body parse_template(std::string_view source) { return Parser(tokenize(source)).parse(); }

Body Parser::parse() { return parse_body({}, nullptr); }

const Token& Parser::peek(size_t ahead) const { return tokens_[std::min(index_ + ahead, tokens_.size() - 1)]; }

const Token& Parser::advance() {
  const Token& token = tokens_[index_];
  if (index_ + 1 < tokens_.size()) ++index_;
  return token;
}

bool Parser::at_operator(std::string_view op) const {
  return current().kind == TokenKind::kOperator && current().text == op;
}

bool Parser::at_name(std::string_view name) const {
  return current().kind == TokenKind::kName && current().text == name;
}

bool Parser::skip_operator(std::string_view op) {
  if (!at_operator(op)) return false;
  advance();
  return true;
}

bool Parser::skip_name(std::string_view name) {
  if (!at_name(name)) return false;
  advance();
  return true;
}

void Parser::expect_operator(std::string_view op) {
  if (!skip_operator(op)) fail(current(), fmt::format("expected '{}', got {}", op, describe(current())));
}

const Token& Parser::expect_kind(TokenKind kind, std::string_view what) {
  if (current().kind != kind) fail(current(), fmt::format("expected {}, got {}", what, describe(current())));
  return advance();
}

void Parser::fail(const Token& token, const std::string& message) const { throw TemplateError(token.pos, message); }

std::string Parser::describe(const Token& token) {
  switch (token.kind) {
    case TokenKind::kText: return "template text";
    case TokenKind::kVariableBegin: return "'{{'";
    case TokenKind::kVariableEnd: return "end of print statement";
    case TokenKind::kBlockBegin: return "'{%'";
    case TokenKind::kBlockEnd: return "end of statement block";
    case TokenKind::kString: return "string literal";
    case TokenKind::kInteger:
    case TokenKind::kFloat: return "number '" + token.text + "'";
    case TokenKind::kEnd: return "end of template";
    default: return "'" + token.text + "'";
  }
}

void Parser::expect_block_end() { expect_kind(TokenKind::kBlockEnd, "end of statement block"); }

Body Parser::parse_body(std::initializer_list<std::string_view> end_tags, std::string* found_end) {
  Body body;
  while (true) {
    const Token& token = current();
    switch (token.kind) {
      case TokenKind::kText:
        body.push_back(Stmt{token.pos, TextStmt{token.text}});
        advance();
        break;
      case TokenKind::kVariableBegin: {
        advance();
        ExprPtr expr = parse_tuple(true, {}, false);
        expect_kind(TokenKind::kVariableEnd, "end of print statement");
        body.push_back(Stmt{token.pos, OutputStmt{std::move(expr)}});
        break;
      }
      case TokenKind::kBlockBegin: {
        const Token& name = peek();
        if (name.kind == TokenKind::kName && std::find(end_tags.begin(), end_tags.end(), name.text) != end_tags.end()) {
          advance();
          *found_end = advance().text;
          return body;
        }
        advance();
        body.push_back(parse_statement());
        break;
      }
      case TokenKind::kEnd: {
        if (end_tags.size() == 0) return body;
        std::string wanted;
        for (std::string_view tag : end_tags) wanted += (wanted.empty() ? "'" : " or '") + std::string(tag) + "'";
        fail(token, "unexpected end of template, expected " + wanted);
      }
      default: fail(token, "unexpected " + describe(token));
    }
  }
}

Stmt Parser::parse_statement() {
  const Token& keyword = current();
  if (keyword.kind != TokenKind::kName) fail(keyword, "tag name expected, got " + describe(keyword));
  const SourcePos pos = keyword.pos;
  const std::string name = advance().text;
  if (name == "if") return parse_if(pos);
  if (name == "for") return parse_for(pos);
  if (name == "set") return parse_set(pos);
  if (name == "macro") return parse_macro(pos);
  if (name == "call") return parse_call_block(pos);
  if (name == "filter") return parse_filter_block(pos);
  if (name == "with") return parse_with(pos);
  if (name == "break" || name == "continue") {
    expect_block_end();
    return Stmt{pos, LoopControlStmt{name == "break"}};
  }
  if (name == "generation") {
    expect_block_end();
    std::string end;
    Body body = parse_body({"endgeneration"}, &end);
    expect_block_end();
    return Stmt{pos, GenerationStmt{std::move(body)}};
  }
  fail(keyword, fmt::format("encountered unknown tag '{}'", name));
}

Stmt Parser::parse_if(SourcePos pos) {
  IfStmt node;
  while (true) {
    ExprPtr test = parse_tuple(false, {}, false);
    expect_block_end();
    std::string end;
    Body body = parse_body({"elif", "else", "endif"}, &end);
    node.branches.emplace_back(std::move(test), std::move(body));
    if (end == "elif") continue;
    if (end == "else") {
      expect_block_end();
      node.else_body = parse_body({"endif"}, &end);
    }
    expect_block_end();
    return Stmt{pos, std::move(node)};
  }
}

Stmt Parser::parse_for(SourcePos pos) {
  ForStmt node;
  node.target = parse_assign_target(false);
  if (!skip_name("in")) fail(current(), "expected 'in', got " + describe(current()));
  node.iterable = parse_tuple(false, {"recursive"}, false);
  if (skip_name("if")) node.filter = parse_expression();
  if (at_name("recursive")) fail(current(), "recursive for loops are not supported");
  expect_block_end();
  std::string end;
  node.body = parse_body({"endfor", "else"}, &end);
  if (end == "else") {
    expect_block_end();
    node.else_body = parse_body({"endfor"}, &end);
  }
  expect_block_end();
  return Stmt{pos, std::move(node)};
}

AssignTarget Parser::parse_assign_target(bool allow_namespace) {
  AssignTarget target;
  if (allow_namespace && current().kind == TokenKind::kName && peek().kind == TokenKind::kOperator &&
      peek().text == ".") {
    target.names.push_back(advance().text);
    advance();
    target.attribute = expect_kind(TokenKind::kName, "attribute name").text;
    return target;
  }
  const bool parenthesized = skip_operator("(");
  while (true) {
    const Token& name = expect_kind(TokenKind::kName, "variable name");
    if (name.text == "true" || name.text == "false" || name.text == "none" || name.text == "True" ||
        name.text == "False" || name.text == "None") {
      fail(name, fmt::format("cannot assign to '{}'", name.text));
    }
    target.names.push_back(name.text);
    if (!skip_operator(",")) break;
    target.is_tuple = true;
    if (current().kind != TokenKind::kName) break;
  }
  if (parenthesized) expect_operator(")");
  return target;
}

Stmt Parser::parse_set(SourcePos pos) {
  AssignTarget target = parse_assign_target(true);
  if (skip_operator("=")) {
    ExprPtr value = parse_tuple(true, {}, false);
    expect_block_end();
    return Stmt{pos, SetStmt{std::move(target), std::move(value)}};
  }
  SetBlockStmt node;
  node.target = std::move(target);
  if (at_operator("|")) node.filter = parse_filter(nullptr, false);
  expect_block_end();
  std::string end;
  node.body = parse_body({"endset"}, &end);
  expect_block_end();
  return Stmt{pos, std::move(node)};
}

std::vector<Param> Parser::parse_params() {
  std::vector<Param> params;
  expect_operator("(");
  while (!skip_operator(")")) {
    if (!params.empty()) expect_operator(",");
    if (skip_operator(")")) break;
    Param param;
    param.name = expect_kind(TokenKind::kName, "parameter name").text;
    if (skip_operator("=")) {
      param.default_value = parse_expression();
    } else if (!params.empty() && params.back().default_value) {
      fail(current(), "non-default argument follows default argument");
    }
    params.push_back(std::move(param));
  }
  return params;
}

Stmt Parser::parse_macro(SourcePos pos) {
  MacroStmt node;
  node.name = expect_kind(TokenKind::kName, "macro name").text;
  node.params = parse_params();
  expect_block_end();
  std::string end;
  node.body = parse_body({"endmacro"}, &end);
  expect_block_end();
  return Stmt{pos, std::move(node)};
}

Stmt Parser::parse_call_block(SourcePos pos) {
  CallBlockStmt node;
  if (at_operator("(")) node.caller_params = parse_params();
  const Token& start = current();
  node.call = parse_expression();
  if (!std::holds_alternative<CallExpr>(node.call->node)) fail(start, "expected call");
  expect_block_end();
  std::string end;
  node.body = parse_body({"endcall"}, &end);
  expect_block_end();
  return Stmt{pos, std::move(node)};
}

Stmt Parser::parse_filter_block(SourcePos pos) {
  FilterBlockStmt node;
  node.filter = parse_filter(nullptr, true);
  expect_block_end();
  std::string end;
  node.body = parse_body({"endfilter"}, &end);
  expect_block_end();
  return Stmt{pos, std::move(node)};
}

Stmt Parser::parse_with(SourcePos pos) {
  WithStmt node;
  while (current().kind != TokenKind::kBlockEnd) {
    if (!node.assignments.empty()) expect_operator(",");
    AssignTarget target = parse_assign_target(false);
    expect_operator("=");
    node.assignments.emplace_back(std::move(target), parse_expression());
  }
  expect_block_end();
  std::string end;
  node.body = parse_body({"endwith"}, &end);
  expect_block_end();
  return Stmt{pos, std::move(node)};
}

}  // namespace rs::chat
