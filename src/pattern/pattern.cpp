#include "pattern/pattern.h"

#include <sstream>

namespace ggflow::pattern {

Predicate consumers(size_t n) {
  return {"consumers == " + std::to_string(n),
          [n](const ir::Value& v) { return v.node->consumers(v.index).size() == n; }};
}
Predicate element_type(ir::ElementType t) {
  return {"type == " + std::string(ir::to_string(t)), [t](const ir::Value& v) { return v.type() == t; }};
}
Predicate rank(size_t r) {
  return {"rank == " + std::to_string(r),
          [r](const ir::Value& v) { return v.shape().rank_known() && v.shape().rank() == r; }};
}
Predicate name(std::string n) {
  return {"name == '" + n + "'", [n](const ir::Value& v) {
            return v.node->name() == n || v.node->out_names(v.index).count(n) > 0;
          }};
}
Predicate const_values(std::vector<double> want) {
  std::ostringstream os;
  os << "constant == [";
  for (size_t i = 0; i < want.size(); ++i) os << (i ? "," : "") << want[i];
  os << "]";
  return {os.str(), [want](const ir::Value& v) {
            if (v.node->type() != ir::OpType::Constant) return false;
            const ir::Tensor& t = v.node->attrs<ir::ConstantAttrs>().value;
            if (ir::is_block(t.type()) || t.numel() != static_cast<int64_t>(want.size())) return false;
            std::vector<float> got = t.to_f32();
            for (size_t i = 0; i < want.size(); ++i)
              if (static_cast<double>(got[i]) != want[i]) return false;
            return true;
          }};
}

P op(ir::OpType t, std::vector<P> inputs, std::vector<Predicate> preds) {
  return op_any_of({t}, std::move(inputs), std::move(preds));
}
P op(ir::OpType t) {
  auto p = std::make_shared<PNode>();
  p->kind = PNode::Kind::op;
  p->types = {t};
  p->label = std::string(ir::to_string(t));
  return p;
}
P op_any_of(std::vector<ir::OpType> types, std::vector<P> inputs, std::vector<Predicate> preds) {
  auto p = std::make_shared<PNode>();
  p->kind = PNode::Kind::op;
  for (size_t i = 0; i < types.size(); ++i) p->label += (i ? "|" : "") + std::string(ir::to_string(types[i]));
  p->types = std::move(types);
  p->inputs = std::move(inputs);
  p->check_inputs = true;
  p->preds = std::move(preds);
  return p;
}
P any(std::vector<Predicate> preds) {
  auto p = std::make_shared<PNode>();
  p->kind = PNode::Kind::any;
  p->preds = std::move(preds);
  p->label = "any";
  return p;
}
P optional(ir::OpType t, P input, std::vector<Predicate> preds) {
  auto p = std::make_shared<PNode>();
  p->kind = PNode::Kind::optional;
  p->types = {t};
  p->inputs = {std::move(input)};
  p->preds = std::move(preds);
  p->label = "optional " + std::string(ir::to_string(t));
  return p;
}
P parameter(std::string n) {
  auto p = std::make_shared<PNode>();
  p->kind = PNode::Kind::op;
  p->types = {ir::OpType::Parameter};
  p->check_inputs = true;
  p->preds = {name(n)};
  p->label = "Parameter '" + n + "'";
  return p;
}
P through(std::vector<ir::OpType> ops, P target) {
  auto p = std::make_shared<PNode>();
  p->kind = PNode::Kind::through;
  p->types = std::move(ops);
  p->inputs = {std::move(target)};
  p->label = "through";
  return p;
}

}  // namespace ggflow::pattern
