// Expression evaluation. Faults from value operations get the position of the innermost node here.
#include <fmt/format.h>

#include "chat/builtins.h"
#include "chat/evaluator.h"
#include "chat/template_error.h"

namespace rs::chat {

const Value* Scope::lookup(const std::string& name) const {
  for (const Scope* scope = this; scope != nullptr; scope = scope->parent_.get()) {
    const auto found = scope->vars_.find(name);
    if (found != scope->vars_.end()) return &found->second;
  }
  return nullptr;
}

Value Evaluator::eval(const Expr& expr, const ScopePtr& scope) {
  try {
    return std::visit([&](const auto& node) { return eval_node(node, scope); }, expr.node);
  } catch (const EvalFault& error) {
    throw TemplateError(expr.pos, error.message);
  } catch (const RaiseFault& raised) {
    throw TemplateRaised(expr.pos, raised.message);
  }
}

Value Evaluator::eval_node(const LiteralExpr& node, const ScopePtr&) { return node.value; }

Value Evaluator::eval_node(const NameExpr& node, const ScopePtr& scope) {
  if (const Value* value = scope->lookup(node.name)) return *value;
  return Value::undefined(fmt::format("'{}' is undefined", node.name));
}

Value Evaluator::eval_node(const ListExpr& node, const ScopePtr& scope) {
  List items;
  items.reserve(node.items.size());
  for (const auto& item : node.items) items.push_back(eval(*item, scope));
  return node.is_tuple ? Value::tuple(std::move(items)) : Value::list(std::move(items));
}

Value Evaluator::eval_node(const DictExpr& node, const ScopePtr& scope) {
  Dict entries;
  for (const auto& [key_expr, value_expr] : node.items) {
    const Value key = eval(*key_expr, scope);
    if (!key.is_string()) fault(fmt::format("dict keys must be strings here, got {}", type_name(key)));
    entries.set(key.as_string(), eval(*value_expr, scope));
  }
  return Value::dict(std::move(entries));
}

Value Evaluator::eval_node(const AttributeExpr& node, const ScopePtr& scope) {
  const Value object = eval(*node.object, scope);
  if (object.is_undefined()) fail_undefined(object);
  return get_attribute(object, node.name);
}

Value Evaluator::eval_node(const SubscriptExpr& node, const ScopePtr& scope) {
  const Value object = eval(*node.object, scope);
  const Value key = eval(*node.index, scope);
  if (object.is_undefined()) fail_undefined(object);
  return get_item(object, key);
}

Value Evaluator::eval_node(const SliceExpr& node, const ScopePtr& scope) {
  const Value object = eval(*node.object, scope);
  auto part = [&](const ExprPtr& expr) { return expr ? eval(*expr, scope) : Value::none(); };
  return slice_value(object, part(node.start), part(node.stop), part(node.step));
}

CallArgs Evaluator::eval_args(const ArgsExpr& args, const ScopePtr& scope) {
  CallArgs out;
  for (const auto& arg : args.positional) out.positional.push_back(eval(*arg, scope));
  if (args.star_args) {
    for (Value& item : iterate(eval(*args.star_args, scope))) out.positional.push_back(std::move(item));
  }
  for (const auto& [name, arg] : args.keyword) out.keyword.emplace_back(name, eval(*arg, scope));
  if (args.star_kwargs) {
    const Value extra = eval(*args.star_kwargs, scope);
    if (!extra.is_dict() || extra.is_namespace())
      fault(fmt::format("argument after ** must be a mapping, not {}", type_name(extra)));
    for (const auto& [name, value] : extra.as_dict().entries()) out.keyword.emplace_back(name, value);
  }
  return out;
}

Value Evaluator::eval_node(const CallExpr& node, const ScopePtr& scope) {
  const Value callee = eval(*node.callee, scope);
  CallArgs args = eval_args(node.args, scope);
  if (callee.is_undefined()) fail_undefined(callee);
  if (!callee.is_function()) fault(fmt::format("'{}' object is not callable", type_name(callee)));
  return callee.as_function().call(args);
}

Value Evaluator::apply_filter(const FilterExpr& node, Value input, const ScopePtr& scope) {
  const FilterFn filter = find_filter(node.name);
  if (filter == nullptr) fault(fmt::format("No filter named '{}'.", node.name));
  const CallArgs args = eval_args(node.args, scope);
  return filter(input, args);
}

Value Evaluator::eval_node(const FilterExpr& node, const ScopePtr& scope) {
  return apply_filter(node, eval(*node.input, scope), scope);
}

Value Evaluator::apply_filter_chain(const Expr& expr, const Value& block_input, const ScopePtr& scope) {
  const auto& node = std::get<FilterExpr>(expr.node);
  Value input = node.input ? apply_filter_chain(*node.input, block_input, scope) : block_input;
  try {
    return apply_filter(node, std::move(input), scope);
  } catch (const EvalFault& error) {
    throw TemplateError(expr.pos, error.message);
  }
}

Value Evaluator::eval_node(const TestExpr& node, const ScopePtr& scope) {
  const TestFn test = find_test(node.name);
  if (test == nullptr) fault(fmt::format("No test named '{}' found.", node.name));
  const Value input = eval(*node.input, scope);
  const CallArgs args = eval_args(node.args, scope);
  return Value::boolean(test(input, args) != node.negated);
}

Value Evaluator::eval_node(const UnaryExpr& node, const ScopePtr& scope) {
  const Value operand = eval(*node.operand, scope);
  if (node.op == "not") return Value::boolean(!truthy(operand));
  if (node.op == "-") return negate(operand);
  if (operand.is_undefined()) fail_undefined(operand);
  if (!operand.is_numeric()) fault(fmt::format("bad operand type for unary +: '{}'", type_name(operand)));
  return operand.is_bool() ? Value::integer(operand.as_int()) : operand;
}

Value Evaluator::eval_node(const BinaryExpr& node, const ScopePtr& scope) {
  Value lhs = eval(*node.lhs, scope);
  if (node.op == "and") return truthy(lhs) ? eval(*node.rhs, scope) : lhs;
  if (node.op == "or") return truthy(lhs) ? lhs : eval(*node.rhs, scope);
  const Value rhs = eval(*node.rhs, scope);
  if (node.op == "~") return Value::string(to_str(lhs) + to_str(rhs));
  return binary_op(node.op, lhs, rhs);
}

Value Evaluator::eval_node(const CompareExpr& node, const ScopePtr& scope) {
  Value lhs = eval(*node.first, scope);
  for (const auto& [op, rhs_expr] : node.rest) {
    Value rhs = eval(*rhs_expr, scope);
    if (!compare_op(op, lhs, rhs)) return Value::boolean(false);
    lhs = std::move(rhs);
  }
  return Value::boolean(true);
}

Value Evaluator::eval_node(const ConditionalExpr& node, const ScopePtr& scope) {
  if (truthy(eval(*node.condition, scope))) return eval(*node.then_value, scope);
  return node.else_value
             ? eval(*node.else_value, scope)
             : Value::undefined("the inline if-expression evaluated to false and no else section was defined.");
}

}  // namespace rs::chat
