// The table built from op_list.h: for each op its name, arity, shape rule and reference kernel.
#pragma once

#include <span>
#include <vector>

#include "base/result.h"
#include "ir/node.h"
#include "ir/tensor.h"

namespace ggflow::ir {

class InferCtx;
using InferFn = Result<std::vector<PortType>> (*)(InferCtx&);
// A kernel: computes the outputs of `node` from its input values. Errors for data-dependent
// failures (an index out of range, a shape that contradicts the graph).
using EvalFn = Result<std::vector<Tensor>> (*)(const Node&, std::span<const Tensor>);

struct OpDef {
  OpType type;
  std::string_view name;
  int min_inputs;
  int max_inputs;  // -1: any
  InferFn infer;
  EvalFn eval;
  bool (*attrs_ok)(const AnyAttrs&);   // holds the op's attribute struct
  AnyAttrs (*default_attrs)();
};

const OpDef& op_def(OpType t);

// An output that aliases an input (op_list.h, GGFLOW_IR_ALIASES).
struct OutputAlias {
  size_t output;
  size_t input;
};
std::span<const OutputAlias> op_aliases(OpType t);  // empty for most ops

#define X(name, attrs, min_in, max_in)                      \
  Result<std::vector<PortType>> infer_##name(InferCtx& c); \
  Result<std::vector<Tensor>> eval_##name(const Node& n, std::span<const Tensor> in);
GGFLOW_IR_OPS(X)
#undef X

}  // namespace ggflow::ir
