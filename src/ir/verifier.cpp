#include "ir/verifier.h"

#include <map>
#include <set>

#include "ir/infer_ctx.h"
#include "ir/op_registry.h"

namespace ggflow::ir {

bool is_elementwise(OpType t) {
  switch (t) {
    case OpType::Add: case OpType::Subtract: case OpType::Multiply: case OpType::Divide:
    case OpType::Power: case OpType::Maximum: case OpType::Equal: case OpType::Less:
    case OpType::LessEqual: case OpType::GreaterEqual: case OpType::LogicalAnd: case OpType::Select:
      return true;
    default: return false;
  }
}

// The broadcast guard. Right-align the operand shapes (missing leading axes count as a static 1).
// At an output axis a, operand i is *stretched* when its dim is a static 1 (or missing) and
// *spread* when its dim is dynamic (symbol S) while some other operand is stretched there: the
// broadcast copies the stretched operand S times. One such axis is fine ([T,H] * [1,H],
// [?T,H] + [H]). The guard refuses an outer product of dynamic dims: two axes a != b and two
// operands i != j such that i is spread at a and stretched at b while j is spread at b and
// stretched at a. The output then has S_a x S_b elements where each operand had only one of the
// two lengths: [1,T,H] + [T,1,H] -> [T,T,H] (the same token count on two axes, the bug of
// DESIGN.md section 3 rule 4) or [1,T,H] + [T',1,H] (two token counts). Symbols do not matter
// to the rule, so it holds whether or not inference could prove two counts equal. An intended
// outer product (a causal mask from positions [T,1] <= [1,KV]) says so with rt_info
// kAllowOuterBroadcast = true on the node.
Status check_broadcast(const Node& node) {
  if (!is_elementwise(node.type())) return {};
  auto it = node.rt_info().find(kAllowOuterBroadcast);
  if (it != node.rt_info().end() && std::holds_alternative<bool>(it->second) && std::get<bool>(it->second)) return {};
  const size_t first = 0;  // every operand takes part (Select's condition too)
  std::vector<const Shape*> s;
  size_t rank = 0;
  for (size_t i = first; i < node.n_inputs(); ++i) {
    const Shape& sh = node.input(i).shape();
    if (!sh.rank_known()) return {};
    s.push_back(&sh);
    rank = std::max(rank, sh.rank());
  }
  auto dim = [&](size_t op, size_t a) -> const Dim* {
    const Shape& sh = *s[op];
    return a + sh.rank() < rank ? nullptr : &sh[a + sh.rank() - rank];
  };
  auto stretched = [&](size_t op, size_t a) { const Dim* d = dim(op, a); return !d || d->is(1); };
  auto spread = [&](size_t op, size_t a) {
    const Dim* d = dim(op, a);
    if (!d || d->is_static()) return false;
    for (size_t o = 0; o < s.size(); ++o)
      if (o != op && stretched(o, a)) return true;
    return false;
  };
  for (size_t i = 0; i < s.size(); ++i)
    for (size_t j = 0; j < s.size(); ++j) {
      if (i == j) continue;
      for (size_t a = 0; a < rank; ++a) {
        if (!spread(i, a) || !stretched(j, a)) continue;
        for (size_t b = 0; b < rank; ++b) {
          if (b == a || !spread(j, b) || !stretched(i, b)) continue;
          std::string sa = dim(i, a)->symbol().name(), sb = dim(j, b)->symbol().name();
          if (sa == sb && dim(i, a)->symbol() != dim(j, b)->symbol()) sb += "'";
          std::string ops;
          for (size_t o = 0; o < s.size(); ++o) ops += (o ? " with " : "") + s[o]->str();
          return make_error(
              node.describe() + ": broadcasting " + ops + " multiplies dynamic dims " + sa + " (axis " +
                  std::to_string(a) + " of input " + std::to_string(i + first) + ") and " + sb + " (axis " +
                  std::to_string(b) + " of input " + std::to_string(j + first) + ") into " +
                  node.out_shape().str(),
              "an activation has its token axis in another place than its partner (check Unsqueeze "
              "axes and reshapes); if this outer product is intended, set rt_info '" +
                  std::string(kAllowOuterBroadcast) + "' = true on the node");
        }
      }
    }
  return {};
}

static Status check_recorded(Node& n) {
  if (n.error()) return *n.error();
  InferCtx ctx(n);
  auto r = op_def(n.type()).infer(ctx);
  if (!r) return make_error(n.describe() + ": " + r.error().what, r.error().hint);
  if (r->size() != n.n_outputs())
    return make_error(n.describe() + ": has " + std::to_string(n.n_outputs()) + " outputs, its inputs give " +
                      std::to_string(r->size()), "call Model::infer() after editing the graph");
  for (size_t i = 0; i < r->size(); ++i)
    if ((*r)[i].type != n.out_type(i) || !((*r)[i].shape == n.out_shape(i)))
      return make_error(n.describe() + ": output " + std::to_string(i) + " is recorded as " +
                            std::string(to_string(n.out_type(i))) + n.out_shape(i).str() + " but its inputs give " +
                            std::string(to_string((*r)[i].type)) + (*r)[i].shape.str(),
                        "call Model::infer() after editing the graph");
  return {};
}

Status verify(const Model& model, const VerifyOptions& options) {
  auto order = model.ordered();
  if (!order) return order.error();
  std::set<const Node*> params, results;
  for (const NodePtr& p : model.parameters()) {
    if (p->type() != OpType::Parameter) return make_error("model parameter " + p->describe() + " is not a Parameter");
    if (!params.insert(p.get()).second) return make_error("model lists " + p->describe() + " twice");
  }
  for (const NodePtr& r : model.results()) {
    if (r->type() != OpType::Result) return make_error("model result " + r->describe() + " is not a Result");
    if (!results.insert(r.get()).second) return make_error("model lists " + r->describe() + " twice");
  }
  for (const NodePtr& s : model.sinks())
    if (s->type() != OpType::Assign) return make_error("model sink " + s->describe() + " is not an Assign");
  std::map<std::string, const Node*> reads;
  for (const NodePtr& n : *order) {
    if (auto s = check_recorded(*n); !s) return s;
    if (n->type() == OpType::Parameter && !params.count(n.get()))
      return make_error(n->describe() + " is used but not listed in the model's parameters",
                        "add it to Model::parameters()");
    for (size_t o = 0; o < n->n_outputs(); ++o)
      for (const Consumer& c : n->consumers(o))
        if (c.node->type() == OpType::Result && !results.count(c.node))
          return make_error(c.node->describe() + " reads " + n->describe() + " but is not in the model's results",
                            "a Result that the model does not list is unreachable; add it or remove it");
    if (n->type() == OpType::ReadValue) {
      const auto& id = n->attrs<VariableAttrs>().id;
      if (reads.count(id)) return make_error(n->describe() + ": variable '" + id + "' is read by two ReadValues");
      reads[id] = n.get();
    }
    if (options.broadcast_guard)
      if (auto s = check_broadcast(*n); !s) return s;
  }
  for (const NodePtr& s : model.sinks()) {
    const auto& a = s->attrs<VariableAttrs>();
    auto it = reads.find(a.id);
    if (it == reads.end())
      return make_error(s->describe() + " writes variable '" + a.id + "' that no ReadValue reads");
    const auto& r = it->second->attrs<VariableAttrs>();
    if (r.type != a.type || r.shape.str() != a.shape.str())
      return make_error(s->describe() + ": variable '" + a.id + "' is " + std::string(to_string(a.type)) + a.shape.str() +
                        " here but " + std::string(to_string(r.type)) + r.shape.str() + " in " + it->second->describe());
  }
  return {};
}

}  // namespace ggflow::ir
