// Statement execution: output, if/for/set/macro/call/filter/with blocks and loop control.
#include <fmt/format.h>

#include "chat/builtins.h"
#include "chat/evaluator.h"
#include "chat/template_error.h"

namespace rs::chat {
namespace {

constexpr int kMaxCallDepth = 100;  // nested macro calls; keeps the C++ stack bounded

// The `loop` object of one for-iteration.
Value make_loop(const List& items, size_t index) {
  const auto count = static_cast<int64_t>(items.size());
  const auto position = static_cast<int64_t>(index);
  Dict loop;
  loop.is_namespace = true;  // attribute access only, like jinja2's LoopContext
  loop.set("index", Value::integer(position + 1));
  loop.set("index0", Value::integer(position));
  loop.set("revindex", Value::integer(count - position));
  loop.set("revindex0", Value::integer(count - position - 1));
  loop.set("first", Value::boolean(position == 0));
  loop.set("last", Value::boolean(position == count - 1));
  loop.set("length", Value::integer(count));
  loop.set("depth", Value::integer(1));
  loop.set("depth0", Value::integer(0));
  if (index > 0) loop.set("previtem", items[index - 1]);
  if (index + 1 < items.size()) loop.set("nextitem", items[index + 1]);
  loop.set("cycle", Value::function("cycle", [position](CallArgs& args) {
             if (args.positional.empty()) fault("no items for cycling given");
             return args.positional[static_cast<size_t>(position) % args.positional.size()];
           }));
  return Value::dict(std::move(loop));
}

// Whether `value` is `target` or contains it.
bool reaches(const Value& value, const Dict& target) {
  if (value.is_list()) {
    for (const Value& item : value.as_list()) {
      if (reaches(item, target)) return true;
    }
  } else if (value.is_dict()) {
    if (&value.as_dict() == &target) return true;
    for (const auto& entry : value.as_dict().entries()) {
      if (reaches(entry.second, target)) return true;
    }
  }
  return false;
}

}  // namespace

Evaluator::Flow Evaluator::exec_body(const Body& body, const ScopePtr& scope, std::string& out) {
  for (const Stmt& stmt : body) {
    const Flow flow = exec(stmt, scope, out);
    if (flow != Flow::kNormal) return flow;
  }
  return Flow::kNormal;
}

Evaluator::Flow Evaluator::exec(const Stmt& stmt, const ScopePtr& scope, std::string& out) {
  try {
    return std::visit([&](const auto& node) { return exec_node(node, scope, out); }, stmt.node);
  } catch (const EvalFault& error) {
    throw TemplateError(stmt.pos, error.message);
  } catch (const RaiseFault& raised) {
    throw TemplateRaised(stmt.pos, raised.message);
  }
}

Evaluator::Flow Evaluator::exec_node(const TextStmt& node, const ScopePtr&, std::string& out) {
  out += node.text;
  return Flow::kNormal;
}

Evaluator::Flow Evaluator::exec_node(const OutputStmt& node, const ScopePtr& scope, std::string& out) {
  out += to_str(eval(*node.expr, scope));
  return Flow::kNormal;
}

Evaluator::Flow Evaluator::exec_node(const IfStmt& node, const ScopePtr& scope, std::string& out) {
  for (const auto& [test, body] : node.branches) {
    if (truthy(eval(*test, scope))) return exec_body(body, scope, out);
  }
  return exec_body(node.else_body, scope, out);
}

Evaluator::Flow Evaluator::exec_node(const ForStmt& node, const ScopePtr& scope, std::string& out) {
  List items = iterate(eval(*node.iterable, scope));
  if (node.filter) {
    List kept;
    for (Value& item : items) {
      auto probe = std::make_shared<Scope>(scope);
      assign(node.target, item, probe);
      if (truthy(eval(*node.filter, probe))) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    exec_body(node.else_body, std::make_shared<Scope>(scope), out);
    return Flow::kNormal;
  }
  for (size_t i = 0; i < items.size(); ++i) {
    auto iteration = std::make_shared<Scope>(scope);
    assign(node.target, items[i], iteration);
    iteration->set("loop", make_loop(items, i));
    if (exec_body(node.body, iteration, out) == Flow::kBreak) break;
  }
  return Flow::kNormal;
}

void Evaluator::assign(const AssignTarget& target, const Value& value, const ScopePtr& scope) {
  if (!target.attribute.empty()) {
    const Value* object = scope->lookup(target.names.front());
    if (object == nullptr || !object->is_namespace()) fault("cannot assign attribute on non-namespace object");
    // Namespace attributes are the only mutation templates can make, so refusing a cycle here keeps every
    // value a tree (no reference-count leak, no endless repr).
    if (reaches(value, object->as_dict())) fault("cannot store a namespace inside itself");
    object->as_dict().set(target.attribute, value);
    return;
  }
  if (!target.is_tuple) {
    scope->set(target.names.front(), value);
    return;
  }
  const List items = iterate(value);
  if (items.size() != target.names.size()) {
    if (items.size() > target.names.size())
      fault(fmt::format("too many values to unpack (expected {})", target.names.size()));
    fault(fmt::format("not enough values to unpack (expected {}, got {})", target.names.size(), items.size()));
  }
  for (size_t i = 0; i < items.size(); ++i) scope->set(target.names[i], items[i]);
}

Evaluator::Flow Evaluator::exec_node(const SetStmt& node, const ScopePtr& scope, std::string&) {
  assign(node.target, eval(*node.value, scope), scope);
  return Flow::kNormal;
}

Evaluator::Flow Evaluator::exec_node(const SetBlockStmt& node, const ScopePtr& scope, std::string&) {
  std::string text;
  exec_body(node.body, std::make_shared<Scope>(scope), text);
  Value value = Value::string(std::move(text));
  if (node.filter) value = apply_filter_chain(*node.filter, value, scope);
  assign(node.target, value, scope);
  return Flow::kNormal;
}

void Evaluator::bind_params(const std::vector<Param>& params, CallArgs& args, const ScopePtr& scope) {
  std::vector<bool> bound(params.size(), false);
  List varargs;
  for (size_t i = 0; i < args.positional.size(); ++i) {
    if (i < params.size()) {
      scope->set(params[i].name, args.positional[i]);
      bound[i] = true;
    } else {
      varargs.push_back(args.positional[i]);
    }
  }
  Dict kwargs;
  for (auto& [name, value] : args.keyword) {
    size_t index = 0;
    while (index < params.size() && params[index].name != name) ++index;
    if (index == params.size()) {
      if (name == "caller") {
        scope->set("caller", value);
      } else {
        kwargs.set(name, value);
      }
      continue;
    }
    if (bound[index]) fault(fmt::format("got multiple values for argument '{}'", name));
    scope->set(name, value);
    bound[index] = true;
  }
  for (size_t i = 0; i < params.size(); ++i) {
    if (bound[i]) continue;
    scope->set(params[i].name, params[i].default_value
                                   ? eval(*params[i].default_value, scope)
                                   : Value::undefined(fmt::format("parameter '{}' was not provided", params[i].name)));
  }
  scope->set("varargs", Value::tuple(std::move(varargs)));
  scope->set("kwargs", Value::dict(std::move(kwargs)));
}

// Macros and callers: run `body` in a child of the defining scope (held weakly: the scope holds the
// macro, so a strong reference would be a cycle) and return its output.
Value Evaluator::call_body(const std::vector<Param>& params, const Body& body, const std::weak_ptr<Scope>& parent,
                           CallArgs& args) {
  const ScopePtr defining = parent.lock();
  if (!defining) fault("macro called after its defining scope ended");
  if (call_depth_ >= kMaxCallDepth) fault("maximum macro recursion depth exceeded");
  auto scope = std::make_shared<Scope>(defining);
  bind_params(params, args, scope);
  std::string out;
  ++call_depth_;
  try {
    exec_body(body, scope, out);
  } catch (...) {
    --call_depth_;
    throw;
  }
  --call_depth_;
  return Value::string(std::move(out));
}

Evaluator::Flow Evaluator::exec_node(const MacroStmt& node, const ScopePtr& scope, std::string&) {
  const std::weak_ptr<Scope> defining = scope;
  scope->set(node.name, Value::function(node.name, [this, &node, defining](CallArgs& args) {
               return call_body(node.params, node.body, defining, args);
             }));
  return Flow::kNormal;
}

Evaluator::Flow Evaluator::exec_node(const CallBlockStmt& node, const ScopePtr& scope, std::string& out) {
  const auto& call = std::get<CallExpr>(node.call->node);
  const Value callee = eval(*call.callee, scope);
  CallArgs args = eval_args(call.args, scope);
  const std::weak_ptr<Scope> site = scope;
  args.keyword.emplace_back("caller", Value::function("caller", [this, &node, site](CallArgs& caller_args) {
                              return call_body(node.caller_params, node.body, site, caller_args);
                            }));
  if (callee.is_undefined()) fail_undefined(callee);
  if (!callee.is_function()) fault(fmt::format("'{}' object is not callable", type_name(callee)));
  out += to_str(callee.as_function().call(args));
  return Flow::kNormal;
}

Evaluator::Flow Evaluator::exec_node(const FilterBlockStmt& node, const ScopePtr& scope, std::string& out) {
  std::string text;
  exec_body(node.body, std::make_shared<Scope>(scope), text);
  out += to_str(apply_filter_chain(*node.filter, Value::string(std::move(text)), scope));
  return Flow::kNormal;
}

Evaluator::Flow Evaluator::exec_node(const WithStmt& node, const ScopePtr& scope, std::string& out) {
  auto inner = std::make_shared<Scope>(scope);
  for (const auto& [target, value] : node.assignments) assign(target, eval(*value, scope), inner);
  return exec_body(node.body, inner, out);
}

Evaluator::Flow Evaluator::exec_node(const LoopControlStmt& node, const ScopePtr&, std::string&) {
  return node.is_break ? Flow::kBreak : Flow::kContinue;
}

Evaluator::Flow Evaluator::exec_node(const GenerationStmt& node, const ScopePtr& scope, std::string& out) {
  return exec_body(node.body, std::make_shared<Scope>(scope), out);
}

}  // namespace rs::chat
