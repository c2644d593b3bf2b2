// The kernel registry: the executor's kernel for every op of the IR's one op list
// (ir/op_list.h), keyed by the op and chosen from what is known when the plan is compiled
// (element types, constant operands, attributes). The table is generated from GGFLOW_IR_OPS, so an
// op added to the IR gets an entry here at once: the IR reference kernel (Kind::fallback), counted
// and printed by `ggflow run --verbose`, until a native kernel is registered with a
// specialization of select<>. The instruction set is the third key: every kernel dispatches on
// the ISA the executor picked at start-up (cpu/isa.h).
#include "cpu/kernel_registry.h"

#include "cpu/kernels/matmul.h"
#include "ir/attrs.h"

namespace ggflow::cpu {

namespace {
using ir::OpType;

template <OpType Op>
Kind select(const ir::Node&, Step&) {
  return Kind::fallback;
}

#define GGFLOW_SELECT(op, kind) \
  template <>                   \
  Kind select<OpType::op>(const ir::Node&, Step&) { return Kind::kind; }
GGFLOW_SELECT(Parameter, param)
GGFLOW_SELECT(Constant, constant)
GGFLOW_SELECT(Result, result)
GGFLOW_SELECT(ReadValue, read_value)
GGFLOW_SELECT(Assign, assign)
GGFLOW_SELECT(Reshape, reshape)
GGFLOW_SELECT(Squeeze, squeeze)
GGFLOW_SELECT(Unsqueeze, unsqueeze)
GGFLOW_SELECT(Transpose, transpose)
GGFLOW_SELECT(Slice, slice)
GGFLOW_SELECT(ShapeOf, shape_of)
GGFLOW_SELECT(RMSNorm, rmsnorm)
GGFLOW_SELECT(LayerNorm, layernorm)
GGFLOW_SELECT(Add, binary)
GGFLOW_SELECT(Multiply, binary)
GGFLOW_SELECT(Swish, activation)
GGFLOW_SELECT(Gelu, activation)
GGFLOW_SELECT(RoPE, rope)
GGFLOW_SELECT(PagedAttention, paged_attention)
GGFLOW_SELECT(ScaledDotProductAttention, sdpa)
GGFLOW_SELECT(ScatterUpdate, scatter)
#undef GGFLOW_SELECT

// Integer to integer (positions, token ids) and f32 <-> f16 (an f16 KV cache in the raw and SDPA
// layouts: convert.h, the bits of the IR's conversion); other float conversions stay on the reference kernel.
template <>
Kind select<OpType::Convert>(const ir::Node& n, Step&) {
  using ir::ElementType;
  const ElementType from = n.input(0).type(), to = n.attrs<ir::TypeAttrs>().type;
  const bool halves = (from == ElementType::f32 && to == ElementType::f16) || (from == ElementType::f16 && to == ElementType::f32);
  return (ir::is_integer(from) && ir::is_integer(to)) || halves ? Kind::convert : Kind::fallback;
}

// f32 activations times a constant [N, K] weight of a type matmul handles, read in place.
template <>
Kind select<OpType::MatMul>(const ir::Node& n, Step& s) {
  const auto& a = n.attrs<ir::MatMulAttrs>();
  const ir::Node& w = *n.input(1).node;
  if (a.transpose_a || !a.transpose_b || w.type() != OpType::Constant) return Kind::fallback;
  const ir::Tensor& t = w.attrs<ir::ConstantAttrs>().value;
  auto g = ir::to_ggml(t.type());
  if (!g || t.rank() != 2 || !matmul_supports(*g) || n.input(0).type() != ir::ElementType::f32) return Kind::fallback;
  s.wtype = *g;
  s.weight = t.bytes();
  s.N = t.shape()[0];
  s.K = t.shape()[1];
  s.w_row_bytes = ir::byte_size(t.type(), s.K);
  return Kind::matmul;
}

// Rows of a constant f32 or block-quantized [rows, E] table (the token embedding), or of an f32
// [rows, ...] value (the selections of the rows whose logits are wanted).
template <>
Kind select<OpType::Gather>(const ir::Node& n, Step&) {
  const auto& a = n.attrs<ir::GatherAttrs>();
  const ir::Node& tbl = *n.input(0).node;
  if (a.axis != 0 || a.batch_dims != 0) return Kind::fallback;
  if (tbl.type() != OpType::Constant)
    return n.input(0).type() == ir::ElementType::f32 && n.input(0).shape().rank_known() && n.input(0).shape().rank() >= 2
               ? Kind::gather_rows
               : Kind::fallback;
  const ir::Tensor& t = tbl.attrs<ir::ConstantAttrs>().value;
  if (t.rank() != 2 || !(ir::is_block(t.type()) || t.type() == ir::ElementType::f32)) return Kind::fallback;
  return Kind::gather_rows;
}

using SelectFn = Kind (*)(const ir::Node&, Step&);
constexpr SelectFn kRegistry[] = {
#define X(name, attrs, min_in, max_in) &select<OpType::name>,
    GGFLOW_IR_OPS(X)
#undef X
};
}  // namespace

Kind choose_kernel(const ir::Node& n, Step& s) { return kRegistry[static_cast<size_t>(n.type())](n, s); }

}  // namespace ggflow::cpu
