#include "pattern/rewriter.h"

#include <algorithm>

namespace ggflow::pattern {

using ir::NodePtr;
using ir::Value;

ir::NodePtr Rewriter::make(ir::OpType type, std::vector<Value> inputs, ir::AnyAttrs attrs, const NodePtr& like) {
  NodePtr n = ir::make_node(type, std::move(inputs), std::move(attrs),
                            like && !like->has_default_name() ? like->name() : std::string{});
  if (like) copy_rt_info(*like, *n);
  ++edits_;
  return n;
}

void Rewriter::copy_rt_info(const ir::Node& from, ir::Node& to) {
  for (const auto& [k, v] : from.rt_info()) to.rt_info().emplace(k, v);
}

Status Rewriter::replace_value(const Value& from, const Value& to, bool move_names) {
  if (from == to) return {};
  if (from.index >= from.node->n_outputs() || to.index >= to.node->n_outputs())
    return make_error("replace_value: output index out of range (" + from.node->describe() + " -> " + to.node->describe() + ")");
  std::vector<ir::Consumer> cs = from.node->consumers(from.index);
  for (const ir::Consumer& c : cs) {
    if (c.node == to.node.get()) continue;  // the replacement may read the value it replaces
    c.node->set_input(c.input, to);
  }
  if (move_names) {
    auto& names = from.node->out_names(from.index);
    to.node->out_names(to.index).insert(names.begin(), names.end());
    names.clear();
  }
  ++edits_;
  return {};
}

Status Rewriter::replace_node(const NodePtr& old_node, const NodePtr& repl, const ReplaceOptions& opt) {
  if (old_node == repl) return {};
  if (old_node->n_outputs() != repl->n_outputs())
    return make_error("replace_node: " + old_node->describe() + " has " + std::to_string(old_node->n_outputs()) +
                      " outputs, " + repl->describe() + " has " + std::to_string(repl->n_outputs()),
                      "replace values one by one with replace_value");
  for (size_t i = 0; i < old_node->n_outputs(); ++i)
    if (auto s = replace_value(Value(old_node, i), Value(repl, i), opt.move_tensor_names); !s) return s;
  if (opt.copy_name && !old_node->has_default_name()) repl->set_name(old_node->name());
  if (opt.copy_rt_info) copy_rt_info(*old_node, *repl);
  for (auto* list : {&model_.parameters(), &model_.results(), &model_.sinks()})
    std::replace(list->begin(), list->end(), old_node, repl);
  ++edits_;
  return {};
}

void Rewriter::set_input(const NodePtr& node, size_t i, Value v) {
  node->set_input(i, std::move(v));
  ++edits_;
}

void Rewriter::add_parameter(const NodePtr& p) { model_.parameters().push_back(p); ++edits_; }
void Rewriter::remove_parameter(const NodePtr& p) { std::erase(model_.parameters(), p); ++edits_; }
void Rewriter::add_result(const NodePtr& r) { model_.results().push_back(r); ++edits_; }
void Rewriter::add_sink(const NodePtr& s) { model_.sinks().push_back(s); ++edits_; }
void Rewriter::remove_sink(const NodePtr& s) { std::erase(model_.sinks(), s); ++edits_; }

}  // namespace ggflow::pattern
