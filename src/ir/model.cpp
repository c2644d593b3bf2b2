#include "ir/model.h"

#include <unordered_map>

namespace ggflow::ir {

NodePtr Model::parameter(std::string_view friendly_name) const {
  for (const NodePtr& p : parameters_)
    if (p->name() == friendly_name) return p;
  return nullptr;
}

NodePtr Model::find(std::string_view friendly_name) const {
  auto order = ordered();
  if (!order) return nullptr;
  for (const NodePtr& n : *order)
    if (n->name() == friendly_name) return n;
  return nullptr;
}

std::optional<Value> Model::output(std::string_view name) const {
  for (const NodePtr& r : results_) {
    if (r->n_inputs() != 1) continue;
    const Value& v = r->input(0);
    if (r->name() == name || v.node->out_names(v.index).count(std::string(name))) return v;
  }
  return std::nullopt;
}

Result<std::vector<NodePtr>> Model::ordered() const {
  std::vector<NodePtr> order;
  std::unordered_map<const Node*, int> state;  // 1 on the stack, 2 done
  struct Frame { NodePtr node; size_t next; };
  auto visit = [&](const NodePtr& root) -> Status {
    if (state[root.get()] == 2) return {};
    std::vector<Frame> stack{{root, 0}};
    state[root.get()] = 1;
    while (!stack.empty()) {
      Frame& f = stack.back();
      if (f.next < f.node->n_inputs()) {
        NodePtr in = f.node->input(f.next++).node;
        int& s = state[in.get()];
        if (s == 1)
          return make_error("the graph has a cycle through " + in->describe() + " and " + f.node->describe(),
                            "a rewrite connected a node to its own consumer");
        if (s == 0) {
          s = 1;
          stack.push_back({in, 0});
        }
        continue;
      }
      state[f.node.get()] = 2;
      order.push_back(f.node);
      stack.pop_back();
    }
    return {};
  };
  for (const NodePtr& p : parameters_)
    if (auto s = visit(p); !s) return s.error();
  for (const NodePtr& r : results_)
    if (auto s = visit(r); !s) return s.error();
  for (const NodePtr& r : sinks_)
    if (auto s = visit(r); !s) return s.error();
  return order;
}

Result<Model> Model::clone() const {
  auto order = ordered();
  if (!order) return order.error();
  std::unordered_map<const Node*, NodePtr> map;
  for (const NodePtr& n : *order) {
    std::vector<Value> in;
    for (const Value& v : n->inputs()) in.push_back(Value(map.at(v.node.get()), v.index));
    NodePtr c = make_node(n->type(), std::move(in), n->any_attrs(), n->has_default_name() ? std::string{} : n->name());
    c->rt_info() = n->rt_info();
    for (size_t i = 0; i < n->n_outputs() && i < c->n_outputs(); ++i) c->out_names(i) = n->out_names(i);
    map[n.get()] = c;
  }
  auto list = [&](const std::vector<NodePtr>& v) {
    std::vector<NodePtr> out;
    for (const NodePtr& n : v) out.push_back(map.at(n.get()));
    return out;
  };
  Model m(list(results_), list(parameters_), list(sinks_), name_);
  m.rt_info_ = rt_info_;
  return m;
}

Status Model::infer() {
  auto order = ordered();
  if (!order) return order.error();
  Status first;
  for (const NodePtr& n : *order) {
    Status s = n->infer();
    if (!s && first) first = s;
  }
  return first;
}

}  // namespace ggflow::ir
