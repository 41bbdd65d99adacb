// Tree-walking evaluator: executes a parsed template against a scope chain, with jinja2's scoping
// (each for-iteration, macro call and block gets a child scope; if does not).
#pragma once

#include <memory>
#include <string>
#include <unordered_map>

#include "chat/ast.h"
#include "chat/value.h"

namespace rs::chat {

class Scope {
 public:
  explicit Scope(std::shared_ptr<Scope> parent = nullptr) : parent_(std::move(parent)) {}
  // Walks up to the outermost scope; nullptr when the name is not bound anywhere.
  const Value* lookup(const std::string& name) const;
  // Binds in this scope only.
  void set(const std::string& name, Value value) { vars_[name] = std::move(value); }

 private:
  std::shared_ptr<Scope> parent_;
  std::unordered_map<std::string, Value> vars_;
};
using ScopePtr = std::shared_ptr<Scope>;

// One render. Not thread-safe; create one per render call. Errors: TemplateError, TemplateRaised.
class Evaluator {
 public:
  enum class Flow { kNormal, kBreak, kContinue };

  Flow exec_body(const Body& body, const ScopePtr& scope, std::string& out);
  Value eval(const Expr& expr, const ScopePtr& scope);

 private:
  Flow exec(const Stmt& stmt, const ScopePtr& scope, std::string& out);
  Flow exec_node(const TextStmt& node, const ScopePtr& scope, std::string& out);
  Flow exec_node(const OutputStmt& node, const ScopePtr& scope, std::string& out);
  Flow exec_node(const IfStmt& node, const ScopePtr& scope, std::string& out);
  Flow exec_node(const ForStmt& node, const ScopePtr& scope, std::string& out);
  Flow exec_node(const SetStmt& node, const ScopePtr& scope, std::string& out);
  Flow exec_node(const SetBlockStmt& node, const ScopePtr& scope, std::string& out);
  Flow exec_node(const MacroStmt& node, const ScopePtr& scope, std::string& out);
  Flow exec_node(const CallBlockStmt& node, const ScopePtr& scope, std::string& out);
  Flow exec_node(const FilterBlockStmt& node, const ScopePtr& scope, std::string& out);
  Flow exec_node(const WithStmt& node, const ScopePtr& scope, std::string& out);
  Flow exec_node(const LoopControlStmt& node, const ScopePtr& scope, std::string& out);
  Flow exec_node(const GenerationStmt& node, const ScopePtr& scope, std::string& out);

  Value eval_node(const LiteralExpr& node, const ScopePtr& scope);
  Value eval_node(const NameExpr& node, const ScopePtr& scope);
  Value eval_node(const ListExpr& node, const ScopePtr& scope);
  Value eval_node(const DictExpr& node, const ScopePtr& scope);
  Value eval_node(const AttributeExpr& node, const ScopePtr& scope);
  Value eval_node(const SubscriptExpr& node, const ScopePtr& scope);
  Value eval_node(const SliceExpr& node, const ScopePtr& scope);
  Value eval_node(const CallExpr& node, const ScopePtr& scope);
  Value eval_node(const FilterExpr& node, const ScopePtr& scope);
  Value eval_node(const TestExpr& node, const ScopePtr& scope);
  Value eval_node(const UnaryExpr& node, const ScopePtr& scope);
  Value eval_node(const BinaryExpr& node, const ScopePtr& scope);
  Value eval_node(const CompareExpr& node, const ScopePtr& scope);
  Value eval_node(const ConditionalExpr& node, const ScopePtr& scope);

  CallArgs eval_args(const ArgsExpr& args, const ScopePtr& scope);
  // A filter chain whose innermost input is null takes `block_input` (filter blocks, {% set x | f %}).
  Value apply_filter_chain(const Expr& expr, const Value& block_input, const ScopePtr& scope);
  Value apply_filter(const FilterExpr& node, Value input, const ScopePtr& scope);
  void assign(const AssignTarget& target, const Value& value, const ScopePtr& scope);
  // Binds macro/caller parameters (positional, keyword, defaults, varargs, kwargs, caller) in `scope`.
  void bind_params(const std::vector<Param>& params, CallArgs& args, const ScopePtr& scope);
  Value call_body(const std::vector<Param>& params, const Body& body, const std::weak_ptr<Scope>& parent,
                  CallArgs& args);

  int call_depth_ = 0;
};

}  // namespace rs::chat
