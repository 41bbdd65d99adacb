// Jinja expression parser, with jinja2's precedence: conditional < or < and < not < comparisons <
// + - < ~ < * / // % < ** < unary - + < postfix (. [] ()) and filters/tests.
#include <fmt/format.h>

#include "chat/parser.h"

namespace rs::chat {
namespace {

template <typename Node>
ExprPtr make(SourcePos pos, Node node) {
  return std::make_unique<Expr>(Expr{pos, std::move(node)});
}

bool is_compare_operator(const Token& token) {
  if (token.kind != TokenKind::kOperator) return false;
  const std::string& op = token.text;
  return op == "==" || op == "!=" || op == "<" || op == "<=" || op == ">" || op == ">=";
}

}  // namespace

ExprPtr Parser::parse_tuple(bool with_condexpr, std::initializer_list<std::string_view> extra_end_names,
                            bool explicit_parentheses) {
  const SourcePos pos = current().pos;
  std::vector<ExprPtr> items;
  bool is_tuple = false;
  auto at_tuple_end = [&] {
    const Token& token = current();
    if (token.kind == TokenKind::kVariableEnd || token.kind == TokenKind::kBlockEnd || at_operator(")")) return true;
    for (std::string_view name : extra_end_names) {
      if (at_name(name)) return true;
    }
    return false;
  };
  while (true) {
    if (!items.empty()) expect_operator(",");
    if (at_tuple_end()) break;
    items.push_back(parse_expression(with_condexpr));
    if (at_operator(",")) {
      is_tuple = true;
    } else {
      break;
    }
  }
  if (!is_tuple) {
    if (!items.empty()) return std::move(items.front());
    if (!explicit_parentheses) fail(current(), "expected an expression, got " + describe(current()));
  }
  return make(pos, ListExpr{std::move(items), true});
}

ExprPtr Parser::parse_expression(bool with_condexpr) { return with_condexpr ? parse_condexpr() : parse_or(); }

ExprPtr Parser::parse_condexpr() {
  const SourcePos pos = current().pos;
  ExprPtr then_value = parse_or();
  while (skip_name("if")) {
    ExprPtr condition = parse_or();
    ExprPtr else_value = skip_name("else") ? parse_condexpr() : nullptr;
    then_value = make(pos, ConditionalExpr{std::move(then_value), std::move(condition), std::move(else_value)});
  }
  return then_value;
}

ExprPtr Parser::parse_or() {
  ExprPtr left = parse_and();
  while (at_name("or")) {
    const SourcePos pos = advance().pos;
    left = make(pos, BinaryExpr{"or", std::move(left), parse_and()});
  }
  return left;
}

ExprPtr Parser::parse_and() {
  ExprPtr left = parse_not();
  while (at_name("and")) {
    const SourcePos pos = advance().pos;
    left = make(pos, BinaryExpr{"and", std::move(left), parse_not()});
  }
  return left;
}

ExprPtr Parser::parse_not() {
  if (at_name("not")) {
    const SourcePos pos = advance().pos;
    return make(pos, UnaryExpr{"not", parse_not()});
  }
  return parse_compare();
}

ExprPtr Parser::parse_compare() {
  const SourcePos pos = current().pos;
  ExprPtr first = parse_math1();
  std::vector<std::pair<std::string, ExprPtr>> rest;
  while (true) {
    if (is_compare_operator(current())) {
      std::string op = advance().text;
      rest.emplace_back(std::move(op), parse_math1());
    } else if (skip_name("in")) {
      rest.emplace_back("in", parse_math1());
    } else if (at_name("not") && peek().kind == TokenKind::kName && peek().text == "in") {
      advance();
      advance();
      rest.emplace_back("notin", parse_math1());
    } else {
      break;
    }
  }
  if (rest.empty()) return first;
  return make(pos, CompareExpr{std::move(first), std::move(rest)});
}

ExprPtr Parser::parse_math1() {
  ExprPtr left = parse_concat();
  while (at_operator("+") || at_operator("-")) {
    const Token& op = advance();
    left = make(op.pos, BinaryExpr{op.text, std::move(left), parse_concat()});
  }
  return left;
}

ExprPtr Parser::parse_concat() {
  ExprPtr left = parse_math2();
  while (at_operator("~")) {
    const SourcePos pos = advance().pos;
    left = make(pos, BinaryExpr{"~", std::move(left), parse_math2()});
  }
  return left;
}

ExprPtr Parser::parse_math2() {
  ExprPtr left = parse_pow();
  while (at_operator("*") || at_operator("/") || at_operator("//") || at_operator("%")) {
    const Token& op = advance();
    left = make(op.pos, BinaryExpr{op.text, std::move(left), parse_pow()});
  }
  return left;
}

ExprPtr Parser::parse_pow() {
  ExprPtr left = parse_unary(true);
  while (at_operator("**")) {
    const SourcePos pos = advance().pos;
    left = make(pos, BinaryExpr{"**", std::move(left), parse_unary(true)});
  }
  return left;
}

ExprPtr Parser::parse_unary(bool with_filter) {
  ExprPtr node;
  if (at_operator("-") || at_operator("+")) {
    const Token& op = advance();
    node = make(op.pos, UnaryExpr{op.text, parse_unary(false)});
  } else {
    node = parse_primary();
  }
  node = parse_postfix(std::move(node));
  if (with_filter) node = parse_filter_expr(std::move(node));
  return node;
}

ExprPtr Parser::parse_primary() {
  const Token& token = current();
  const SourcePos pos = token.pos;
  switch (token.kind) {
    case TokenKind::kName: {
      const std::string& name = token.text;
      advance();
      if (name == "true" || name == "True") return make(pos, LiteralExpr{Value::boolean(true)});
      if (name == "false" || name == "False") return make(pos, LiteralExpr{Value::boolean(false)});
      if (name == "none" || name == "None") return make(pos, LiteralExpr{Value::none()});
      return make(pos, NameExpr{name});
    }
    case TokenKind::kString: {
      std::string text;
      while (current().kind == TokenKind::kString) text += advance().text;
      return make(pos, LiteralExpr{Value::string(std::move(text))});
    }
    case TokenKind::kInteger: advance(); return make(pos, LiteralExpr{Value::integer(token.integer)});
    case TokenKind::kFloat: advance(); return make(pos, LiteralExpr{Value::number(token.number)});
    case TokenKind::kOperator:
      if (token.text == "(") {
        advance();
        ExprPtr inner = parse_tuple(true, {}, true);
        expect_operator(")");
        return inner;
      }
      if (token.text == "[") {
        advance();
        ListExpr list;
        while (!skip_operator("]")) {
          if (!list.items.empty()) expect_operator(",");
          if (skip_operator("]")) break;
          list.items.push_back(parse_expression());
        }
        return make(pos, std::move(list));
      }
      if (token.text == "{") {
        advance();
        DictExpr dict;
        while (!skip_operator("}")) {
          if (!dict.items.empty()) expect_operator(",");
          if (skip_operator("}")) break;
          ExprPtr key = parse_expression();
          expect_operator(":");
          dict.items.emplace_back(std::move(key), parse_expression());
        }
        return make(pos, std::move(dict));
      }
      break;
    default: break;
  }
  fail(token, "unexpected " + describe(token));
}

ExprPtr Parser::parse_postfix(ExprPtr node) {
  while (true) {
    if (at_operator(".") || at_operator("[")) {
      node = parse_subscript(std::move(node));
    } else if (at_operator("(")) {
      const SourcePos pos = current().pos;
      node = make(pos, CallExpr{std::move(node), parse_call_args()});
    } else {
      return node;
    }
  }
}

ExprPtr Parser::parse_filter_expr(ExprPtr node) {
  while (true) {
    if (at_operator("|")) {
      node = parse_filter(std::move(node), false);
    } else if (at_name("is")) {
      node = parse_test(std::move(node));
    } else if (at_operator("(")) {
      const SourcePos pos = current().pos;
      node = make(pos, CallExpr{std::move(node), parse_call_args()});
    } else {
      return node;
    }
  }
}

ExprPtr Parser::parse_subscript(ExprPtr node) {
  const Token& token = advance();
  if (token.text == ".") {
    const Token& attribute = current();
    if (attribute.kind == TokenKind::kName) {
      advance();
      return make(token.pos, AttributeExpr{std::move(node), attribute.text});
    }
    if (attribute.kind == TokenKind::kInteger) {
      advance();
      return make(token.pos,
                  SubscriptExpr{std::move(node), make(attribute.pos, LiteralExpr{Value::integer(attribute.integer)})});
    }
    fail(attribute, "expected name or number");
  }
  std::vector<ExprPtr> indexes;
  while (!skip_operator("]")) {
    if (!indexes.empty()) expect_operator(",");
    indexes.push_back(parse_subscribed());
  }
  if (indexes.size() != 1) fail(token, "tuple subscripts are not supported");
  ExprPtr index = std::move(indexes.front());
  if (auto* slice = std::get_if<SliceExpr>(&index->node)) {
    slice->object = std::move(node);
    return index;
  }
  return make(token.pos, SubscriptExpr{std::move(node), std::move(index)});
}

ExprPtr Parser::parse_subscribed() {
  const SourcePos pos = current().pos;
  SliceExpr slice;
  if (!skip_operator(":")) {
    ExprPtr start = parse_expression();
    if (!skip_operator(":")) return start;
    slice.start = std::move(start);
  }
  if (!at_operator(":") && !at_operator("]") && !at_operator(",")) slice.stop = parse_expression();
  if (skip_operator(":")) {
    if (!at_operator("]") && !at_operator(",")) slice.step = parse_expression();
  }
  return make(pos, std::move(slice));
}

std::string Parser::parse_dotted_name() {
  std::string name = expect_kind(TokenKind::kName, "name").text;
  while (at_operator(".")) {
    advance();
    name += "." + expect_kind(TokenKind::kName, "name").text;
  }
  return name;
}

ExprPtr Parser::parse_filter(ExprPtr node, bool start_inline) {
  while (at_operator("|") || start_inline) {
    if (!start_inline) advance();
    start_inline = false;
    const SourcePos pos = current().pos;
    FilterExpr filter{std::move(node), parse_dotted_name(), {}};
    if (at_operator("(")) filter.args = parse_call_args();
    node = make(pos, std::move(filter));
  }
  return node;
}

ExprPtr Parser::parse_test(ExprPtr node) {
  advance();  // "is"
  const bool negated = skip_name("not");
  const SourcePos pos = current().pos;
  TestExpr test{std::move(node), parse_dotted_name(), {}, negated};
  const Token& next = current();
  if (at_operator("(")) {
    test.args = parse_call_args();
  } else if ((next.kind == TokenKind::kName || next.kind == TokenKind::kString || next.kind == TokenKind::kInteger ||
              next.kind == TokenKind::kFloat || at_operator("(") || at_operator("[") || at_operator("{")) &&
             !at_name("else") && !at_name("or") && !at_name("and")) {
    if (at_name("is")) fail(next, "you cannot chain multiple tests with is");
    test.args.positional.push_back(parse_postfix(parse_primary()));
  }
  return make(pos, std::move(test));
}

ArgsExpr Parser::parse_call_args() {
  const Token& open = current();
  expect_operator("(");
  ArgsExpr args;
  bool first = true;
  while (!skip_operator(")")) {
    if (!first) expect_operator(",");
    first = false;
    if (skip_operator(")")) break;
    if (skip_operator("*")) {
      args.star_args = parse_expression();
    } else if (skip_operator("**")) {
      args.star_kwargs = parse_expression();
    } else if (current().kind == TokenKind::kName && peek().kind == TokenKind::kOperator && peek().text == "=") {
      std::string name = advance().text;
      advance();
      args.keyword.emplace_back(std::move(name), parse_expression());
    } else {
      if (!args.keyword.empty()) fail(open, "positional argument follows keyword argument");
      args.positional.push_back(parse_expression());
    }
  }
  return args;
}

}  // namespace rs::chat
