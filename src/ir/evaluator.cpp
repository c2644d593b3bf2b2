#include "ir/evaluator.h"

#include <unordered_map>

#include "ir/kernel_util.h"

namespace ggflow::ir {

namespace {
struct Binding {
  int64_t value;
  const Node* by;
};

// The output agrees with the graph: type, rank, static dims, and one length per symbol. The
// message is built only when something disagrees.
Status check_output(const Node& n, size_t i, const Tensor& t, std::unordered_map<uint32_t, Binding>& syms) {
  const Shape& s = n.out_shape(i);
  auto what = [&] {
    return n.describe() + ": output " + std::to_string(i) + " has " + std::string(to_string(t.type())) +
           shape_str(t.shape()) + ", the graph says " + std::string(to_string(n.out_type(i))) + s.str();
  };
  if (t.type() != n.out_type(i)) return make_error(what(), "the kernel and the shape rule disagree on the type");
  if (!s.rank_known()) return {};
  if (s.rank() != t.rank()) return make_error(what());
  for (size_t a = 0; a < s.rank(); ++a) {
    const Dim& d = s[a];
    int64_t v = t.shape()[a];
    if (d.is_static()) {
      if (d.value() != v) return make_error(what());
      continue;
    }
    auto [it, fresh] = syms.try_emplace(d.symbol().id(), Binding{v, &n});
    if (!fresh && it->second.value != v)
      return make_error(what() + ": symbol " + d.symbol().name() + " is " + std::to_string(v) + " here but " +
                            std::to_string(it->second.value) + " at " + it->second.by->describe(),
                        "two dims the graph claims equal differ at run time; check the inputs' lengths");
  }
  return {};
}
}  // namespace

Result<Evaluator> Evaluator::create(const Model& model, EvalOptions options) {
  auto order = model.ordered();
  if (!order) return order.error();
  Evaluator e;
  e.model_ = &model;
  e.opt_ = std::move(options);
  std::unordered_map<const Node*, uint32_t> step_of;
  std::unordered_map<const Node*, int> param_of;
  for (size_t i = 0; i < model.parameters().size(); ++i) param_of[model.parameters()[i].get()] = static_cast<int>(i);
  std::unordered_map<std::string, int> var_of;
  std::vector<uint32_t> last_use(order->size(), 0);
  for (const NodePtr& np : *order) {
    const Node& n = *np;
    if (n.error()) return *n.error();
    Step s;
    s.node = &n;
    s.aliases = op_aliases(n.type());
    s.consumers.assign(n.n_outputs(), 0);
    const uint32_t at = static_cast<uint32_t>(e.steps_.size());
    for (const Value& v : n.inputs()) {
      uint32_t from = step_of.at(v.node.get());
      s.inputs.push_back({from, static_cast<uint32_t>(v.index)});
      e.steps_[from].consumers[v.index]++;
      last_use[from] = at;
    }
    if (n.type() == OpType::Parameter) {
      auto it = param_of.find(&n);
      if (it == param_of.end()) return make_error(n.describe() + " is not a parameter of the model");
      s.param = it->second;
    }
    if (n.type() == OpType::ReadValue || n.type() == OpType::Assign) {
      const std::string& id = n.attrs<VariableAttrs>().id;
      auto [it, fresh] = var_of.try_emplace(id, static_cast<int>(e.var_ids_.size()));
      if (fresh) e.var_ids_.push_back(id);
      s.variable = it->second;
    }
    step_of[&n] = at;
    e.steps_.push_back(std::move(s));
  }
  for (uint32_t i = 0; i < e.steps_.size(); ++i)
    if (e.steps_[i].node->type() != OpType::Result && last_use[i] > i) e.steps_[last_use[i]].release.push_back(i);
  for (const NodePtr& r : model.results()) e.result_steps_.push_back(step_of.at(r.get()));
  return e;
}

Result<std::vector<Tensor>> Evaluator::run(std::span<const Tensor> parameters, std::vector<Tensor>* state,
                                           std::span<const uint8_t> writable) const {
  if (parameters.size() != model_->parameters().size())
    return make_error("evaluate: got " + std::to_string(parameters.size()) + " parameter values, the model has " +
                      std::to_string(model_->parameters().size()));
  if (state && state->size() != var_ids_.size()) state->resize(var_ids_.size());
  std::vector<std::vector<Tensor>> values(steps_.size());
  // exclusive[i][o]: only value (i, o) reaches its buffer, and that buffer may be written
  std::vector<std::vector<bool>> exclusive(steps_.size());
  std::unordered_map<uint32_t, Binding> syms;
  std::vector<std::pair<int, Tensor>> pending;  // Assign writes, committed at the end
  std::vector<Tensor> in;

  for (uint32_t si = 0; si < steps_.size(); ++si) {
    const Step& st = steps_[si];
    const Node& n = *st.node;
    in.clear();
    for (const Input& x : st.inputs) in.push_back(values[x.step][x.output]);
    std::vector<Tensor> out;
    std::vector<bool> excl;
    if (st.param >= 0) {
      const Tensor& t = parameters[st.param];
      if (t.type() != n.out_type())
        return make_error(n.describe() + ": value is " + std::string(to_string(t.type())) + ", the parameter is " +
                          std::string(to_string(n.out_type())));
      out.push_back(t);
      excl.push_back(!writable.empty() && writable[st.param] && t.writable());
    } else if (n.type() == OpType::ReadValue) {
      const Tensor* v = state && !(*state)[st.variable].empty_handle() ? &(*state)[st.variable] : nullptr;
      if (v) out.push_back(*v);
      else if (!in.empty()) out.push_back(in[0]);
      else return make_error(n.describe() + ": variable '" + var_ids_[st.variable] + "' has no value and no init input",
                             "set it in the state or give the ReadValue an init input");
      excl.push_back(false);
    } else if (n.type() == OpType::Assign) {
      pending.emplace_back(st.variable, in[0]);
    } else {
      for (const OutputAlias& a : st.aliases) {  // hand the aliased input over exclusively
        const Input& x = st.inputs[a.input];
        if (!(exclusive[x.step][x.output] && steps_[x.step].consumers[x.output] == 1)) in[a.input] = in[a.input].clone();
      }
      auto r = op_def(n.type()).eval(n, in);
      if (!r) return r.error();
      out = std::move(*r);
      for (const Tensor& t : out) {  // fresh buffer, or a view of an input that was the only one reaching it
        bool e = n.type() != OpType::Constant;
        for (size_t j = 0; j < in.size() && e; ++j)
          if (t.owner() && t.owner() == in[j].owner()) {
            const Input& x = st.inputs[j];
            e = exclusive[x.step][x.output] && steps_[x.step].consumers[x.output] == 1;
          }
        excl.push_back(e);
      }
    }
    if (out.size() != n.n_outputs())
      return make_error(n.describe() + ": kernel made " + std::to_string(out.size()) + " outputs, the node has " +
                        std::to_string(n.n_outputs()));
    if (opt_.check_shapes)
      for (size_t i = 0; i < out.size(); ++i)
        if (auto s = check_output(n, i, out[i], syms); !s) return s.error();
    if (opt_.on_node) opt_.on_node(n, out);
    values[si] = std::move(out);
    exclusive[si] = std::move(excl);
    for (uint32_t dead : st.release) values[dead].clear();
  }
  std::vector<Tensor> results;
  for (uint32_t r : result_steps_) results.push_back(values[r].at(0));
  if (state)
    for (auto& [var, t] : pending) (*state)[var] = std::move(t);
  return results;
}

Result<std::vector<Tensor>> evaluate(const Model& model, const std::vector<Tensor>& parameters, StateStore* state,
                                     const EvalOptions& opt) {
  auto ev = Evaluator::create(model, opt);
  if (!ev) return ev.error();
  std::vector<Tensor> vars(ev->variable_ids().size());
  if (state)
    for (size_t i = 0; i < vars.size(); ++i)
      if (auto it = state->values.find(ev->variable_ids()[i]); it != state->values.end()) vars[i] = it->second;
  auto r = ev->run(parameters, &vars);
  if (!r) return r.error();
  if (state)
    for (size_t i = 0; i < vars.size(); ++i)
      if (!vars[i].empty_handle()) state->values[ev->variable_ids()[i]] = vars[i];
  return r;
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
