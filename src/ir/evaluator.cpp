#include "ir/evaluator.h"

#include <unordered_map>

#include "ir/kernel_util.h"
#include "ir/op_registry.h"

namespace ggflow::ir {

namespace {
struct Binding {
  int64_t value;
  const Node* by;
};

Status check_output(const Node& n, size_t i, const Tensor& t, std::unordered_map<uint32_t, Binding>& syms) {
  const Shape& s = n.out_shape(i);
  std::string what = n.describe() + ": output " + std::to_string(i) + " has " +
                     std::string(to_string(t.type())) + shape_str(t.shape()) + ", the graph says " +
                     std::string(to_string(n.out_type(i))) + s.str();
  if (t.type() != n.out_type(i)) return make_error(what, "the kernel and the shape rule disagree on the type");
  if (!s.rank_known()) return {};
  if (s.rank() != t.rank()) return make_error(what);
  for (size_t a = 0; a < s.rank(); ++a) {
    const Dim& d = s[a];
    int64_t v = t.shape()[a];
    if (d.is_static()) {
      if (d.value() != v) return make_error(what);
      continue;
    }
    auto [it, fresh] = syms.try_emplace(d.symbol().id(), Binding{v, &n});
    if (!fresh && it->second.value != v)
      return make_error(what + ": symbol " + d.symbol().name() + " is " + std::to_string(v) + " here but " +
                            std::to_string(it->second.value) + " at " + it->second.by->describe(),
                        "two dims the graph claims equal differ at run time; check the inputs' lengths");
  }
  return {};
}
}  // namespace

Result<std::vector<Tensor>> evaluate(const Model& model, const std::vector<Tensor>& parameters, StateStore* state,
                                     const EvalOptions& opt) {
  if (parameters.size() != model.parameters().size())
    return make_error("evaluate: got " + std::to_string(parameters.size()) + " parameter values, the model has " +
                      std::to_string(model.parameters().size()));
  auto order = model.ordered();
  if (!order) return order.error();
  std::unordered_map<const Node*, std::vector<Tensor>> values;
  std::unordered_map<const Node*, size_t> uses;  // consumers still to run
  for (const NodePtr& n : *order)
    for (const Value& v : n->inputs()) ++uses[v.node.get()];
  std::unordered_map<const Node*, size_t> param_index;
  for (size_t i = 0; i < model.parameters().size(); ++i) param_index[model.parameters()[i].get()] = i;
  std::unordered_map<uint32_t, Binding> syms;
  std::map<std::string, Tensor> pending;  // Assign writes, committed at the end
  StateStore empty;
  StateStore& st = state ? *state : empty;

  for (const NodePtr& np : *order) {
    const Node& n = *np;
    if (n.error()) return *n.error();
    std::vector<Tensor> in;
    for (const Value& v : n.inputs()) in.push_back(values.at(v.node.get()).at(v.index));
    std::vector<Tensor> out;
    if (n.type() == OpType::Parameter) {
      auto it = param_index.find(&n);
      if (it == param_index.end()) return make_error(n.describe() + " is not a parameter of the model");
      const Tensor& t = parameters[it->second];
      if (t.type() != n.out_type())
        return make_error(n.describe() + ": value is " + std::string(to_string(t.type())) + ", the parameter is " +
                          std::string(to_string(n.out_type())));
      out.push_back(t);
    } else if (n.type() == OpType::ReadValue) {
      const auto& id = n.attrs<VariableAttrs>().id;
      auto it = st.values.find(id);
      if (it != st.values.end()) out.push_back(it->second);
      else if (!in.empty()) out.push_back(in[0]);
      else return make_error(n.describe() + ": variable '" + id + "' has no value and no init input",
                             "set it in the StateStore or give the ReadValue an init input");
    } else if (n.type() == OpType::Assign) {
      pending[n.attrs<VariableAttrs>().id] = in[0];
    } else {
      auto r = op_def(n.type()).eval(n, in);
      if (!r) return r.error();
      out = std::move(*r);
    }
    if (out.size() != n.n_outputs())
      return make_error(n.describe() + ": kernel made " + std::to_string(out.size()) + " outputs, the node has " +
                        std::to_string(n.n_outputs()));
    if (opt.check_shapes)
      for (size_t i = 0; i < out.size(); ++i)
        if (auto s = check_output(n, i, out[i], syms); !s) return s.error();
    if (opt.on_node) opt.on_node(n, out);
    values[&n] = std::move(out);
    for (const Value& v : n.inputs())
      if (--uses[v.node.get()] == 0 && v.node->type() != OpType::Result) values.erase(v.node.get());
  }
  std::vector<Tensor> results;
  for (const NodePtr& r : model.results()) results.push_back(values.at(r.get()).at(0));
  for (auto& [id, t] : pending) st.values[id] = t;
  return results;
}

Result<std::vector<Tensor>> evaluate_named(const Model& model, const std::map<std::string, Tensor>& parameters,
                                     StateStore* state, const EvalOptions& options) {
  std::vector<Tensor> ordered;
  for (const NodePtr& p : model.parameters()) {
    auto it = parameters.find(p->name());
    if (it == parameters.end())
      return make_error("evaluate: no value for parameter '" + p->name() + "'", "pass every parameter by its friendly name");
    ordered.push_back(it->second);
  }
  if (parameters.size() != ordered.size())
    for (const auto& [name, t] : parameters)
      if (!model.parameter(name)) return make_error("evaluate: the model has no parameter '" + name + "'");
  return evaluate(model, ordered, state, options);
}

}  // namespace ggflow::ir
