// The pattern language. A pattern is a small tree (or DAG) of pattern nodes matched against a
// graph value (node, output index):
//   op(OpType::Gather, {any(), any()})          a Gather whose inputs match the sub-patterns
//   op(OpType::Gather)                          a Gather, inputs not looked at
//   any({rank(2)})                              any value satisfying the predicates
//   optional(OpType::Convert, p)                Convert(p), or p itself (no Convert there)
//   parameter("inp_tokens")                     the Parameter with that friendly / tensor name
//   through({Squeeze, Convert}, p)              p behind any chain of those single-input ops
// Predicates look at the matched value: consumers(1), element_type(f32), rank(4),
// name("inp_tokens"), const_values({0}), attr<GatherAttrs>(...). Each says what it wants, so a
// failed match explains itself. A pattern node that appears twice must match the same value.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ir/node.h"

namespace ggflow::pattern {

struct Predicate {
  std::string what;                               // "consumers == 1": for why-not messages
  std::function<bool(const ir::Value&)> test;
};
Predicate consumers(size_t n);                    // the matched output has exactly n consumers
Predicate element_type(ir::ElementType t);
Predicate rank(size_t r);
Predicate name(std::string n);                    // friendly name or a tensor name of the output
Predicate const_values(std::vector<double> v);    // a Constant holding exactly these values
template <class A>
Predicate attr(std::string what, std::function<bool(const A&)> f) {
  return {std::move(what), [f](const ir::Value& v) {
            const auto* a = std::get_if<A>(&v.node->any_attrs());
            return a && f(*a);
          }};
}

struct PNode;
using P = std::shared_ptr<const PNode>;

struct PNode {
  enum class Kind { op, any, optional, through };
  Kind kind = Kind::any;
  std::vector<ir::OpType> types;                  // op / optional / through: accepted op types
  std::vector<P> inputs;                          // op: sub-patterns; optional/through: {inner}
  bool check_inputs = false;                      // op: inputs were given
  std::vector<Predicate> preds;
  std::string label;                              // for messages
};

P op(ir::OpType t, std::vector<P> inputs, std::vector<Predicate> preds = {});
P op(ir::OpType t);                               // any inputs
P op_any_of(std::vector<ir::OpType> types, std::vector<P> inputs, std::vector<Predicate> preds = {});
P any(std::vector<Predicate> preds = {});
P optional(ir::OpType t, P input, std::vector<Predicate> preds = {});
P parameter(std::string name);
P through(std::vector<ir::OpType> ops, P target);

}  // namespace ggflow::pattern
