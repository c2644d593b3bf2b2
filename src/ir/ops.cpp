#include "ir/ops.h"

namespace ggflow::ir::ops {

namespace {
NodePtr mk(OpType t, std::vector<Value> in, AnyAttrs a = NoAttrs{}, std::string name = {}) {
  return make_node(t, std::move(in), std::move(a), std::move(name));
}
std::vector<int64_t> shape_or(std::optional<std::vector<int64_t>> s, size_t n) {
  return s ? *s : std::vector<int64_t>{static_cast<int64_t>(n)};
}
}  // namespace

NodePtr parameter(ElementType type, Shape shape, std::string name) {
  return mk(OpType::Parameter, {}, ParameterAttrs{type, std::move(shape)}, std::move(name));
}
NodePtr constant(Tensor value, std::string name) {
  return mk(OpType::Constant, {}, ConstantAttrs{std::move(value)}, std::move(name));
}
NodePtr const_i64(std::vector<int64_t> v, std::optional<std::vector<int64_t>> s) {
  auto shape = shape_or(s, v.size());
  return constant(Tensor::from_i64(ElementType::i64, shape, v));
}
NodePtr const_i32(std::vector<int64_t> v, std::optional<std::vector<int64_t>> s) {
  auto shape = shape_or(s, v.size());
  return constant(Tensor::from_i64(ElementType::i32, shape, v));
}
NodePtr const_f32(std::vector<float> v, std::optional<std::vector<int64_t>> s) {
  auto shape = shape_or(s, v.size());
  return constant(Tensor::from_f32(ElementType::f32, shape, v));
}
NodePtr scalar_f32(float v) { return const_f32({v}, std::vector<int64_t>{}); }
NodePtr scalar_i64(int64_t v) { return const_i64({v}, std::vector<int64_t>{}); }
NodePtr result(Value v, std::string name) { return mk(OpType::Result, {std::move(v)}, NoAttrs{}, std::move(name)); }
NodePtr convert(Value v, ElementType to) { return mk(OpType::Convert, {std::move(v)}, TypeAttrs{to}); }
NodePtr shape_of(Value v, ElementType type) { return mk(OpType::ShapeOf, {std::move(v)}, TypeAttrs{type}); }
NodePtr range(Value a, Value b, Value c, ElementType type) {
  return mk(OpType::Range, {std::move(a), std::move(b), std::move(c)}, TypeAttrs{type});
}
NodePtr read_value(VariableAttrs var, std::optional<Value> init) {
  std::vector<Value> in;
  if (init) in.push_back(*init);
  return mk(OpType::ReadValue, std::move(in), std::move(var));
}
NodePtr assign(Value v, VariableAttrs var) { return mk(OpType::Assign, {std::move(v)}, std::move(var)); }

NodePtr reshape(Value v, Value t, bool sz) { return mk(OpType::Reshape, {std::move(v), std::move(t)}, ReshapeAttrs{sz}); }
NodePtr reshape(Value v, std::vector<int64_t> t, bool sz) { return reshape(std::move(v), const_i64(std::move(t)), sz); }
NodePtr squeeze(Value v, std::vector<int64_t> axes) { return mk(OpType::Squeeze, {std::move(v)}, AxesAttrs{std::move(axes)}); }
NodePtr unsqueeze(Value v, std::vector<int64_t> axes) { return mk(OpType::Unsqueeze, {std::move(v)}, AxesAttrs{std::move(axes)}); }
NodePtr transpose(Value v, std::vector<int64_t> perm) { return mk(OpType::Transpose, {std::move(v)}, TransposeAttrs{std::move(perm)}); }
NodePtr concat(std::vector<Value> vs, int64_t axis) { return mk(OpType::Concat, std::move(vs), AxisAttrs{axis}); }
NodePtr broadcast(Value v, Value t) { return mk(OpType::Broadcast, {std::move(v), std::move(t)}); }
NodePtr tile(Value v, std::vector<int64_t> r) { return mk(OpType::Tile, {std::move(v)}, TileAttrs{std::move(r)}); }

NodePtr gather(Value d, Value i, int64_t axis, int64_t bd) {
  return mk(OpType::Gather, {std::move(d), std::move(i)}, GatherAttrs{axis, bd});
}
NodePtr slice(Value v, std::vector<int64_t> s, std::vector<int64_t> e, std::vector<int64_t> st, std::vector<int64_t> ax) {
  return mk(OpType::Slice, {std::move(v)}, SliceAttrs{std::move(s), std::move(e), std::move(st), std::move(ax)});
}
NodePtr variadic_split(Value v, int64_t axis, std::vector<int64_t> l) {
  return mk(OpType::VariadicSplit, {std::move(v)}, SplitAttrs{axis, std::move(l)});
}
NodePtr scatter_update(Value d, Value i, Value u, int64_t axis) {
  return mk(OpType::ScatterUpdate, {std::move(d), std::move(i), std::move(u)}, AxisAttrs{axis});
}

#define GGFLOW_B(fn, Op) \
  NodePtr fn(Value a, Value b) { return mk(OpType::Op, {std::move(a), std::move(b)}); }
GGFLOW_B(add, Add)
GGFLOW_B(subtract, Subtract)
GGFLOW_B(multiply, Multiply)
GGFLOW_B(divide, Divide)
GGFLOW_B(power, Power)
GGFLOW_B(maximum, Maximum)
GGFLOW_B(equal, Equal)
GGFLOW_B(less, Less)
GGFLOW_B(less_equal, LessEqual)
GGFLOW_B(greater_equal, GreaterEqual)
GGFLOW_B(logical_and, LogicalAnd)
#undef GGFLOW_B
NodePtr select(Value c, Value a, Value b) { return mk(OpType::Select, {std::move(c), std::move(a), std::move(b)}); }
#define GGFLOW_U(fn, Op) \
  NodePtr fn(Value v) { return mk(OpType::Op, {std::move(v)}); }
GGFLOW_U(sqrt, Sqrt)
GGFLOW_U(exp, Exp)
GGFLOW_U(tanh, Tanh)
GGFLOW_U(sin, Sin)
GGFLOW_U(cos, Cos)
GGFLOW_U(swish, Swish)
#undef GGFLOW_U
NodePtr gelu(Value v, GeluMode m) { return mk(OpType::Gelu, {std::move(v)}, GeluAttrs{m}); }

NodePtr reduce_sum(Value v, std::vector<int64_t> ax, bool k) { return mk(OpType::ReduceSum, {std::move(v)}, ReduceAttrs{std::move(ax), k}); }
NodePtr reduce_mean(Value v, std::vector<int64_t> ax, bool k) { return mk(OpType::ReduceMean, {std::move(v)}, ReduceAttrs{std::move(ax), k}); }
NodePtr reduce_prod(Value v, std::vector<int64_t> ax, bool k) { return mk(OpType::ReduceProd, {std::move(v)}, ReduceAttrs{std::move(ax), k}); }
NodePtr softmax(Value v, int64_t axis) { return mk(OpType::Softmax, {std::move(v)}, AxisAttrs{axis}); }
NodePtr rms_norm(Value v, std::optional<Value> g, float eps) {
  std::vector<Value> in{std::move(v)};
  if (g) in.push_back(*g);
  return mk(OpType::RMSNorm, std::move(in), RMSNormAttrs{eps});
}
NodePtr layer_norm(Value v, float eps) { return mk(OpType::LayerNorm, {std::move(v)}, LayerNormAttrs{eps}); }
NodePtr matmul(Value a, Value b, bool ta, bool tb) { return mk(OpType::MatMul, {std::move(a), std::move(b)}, MatMulAttrs{ta, tb}); }
NodePtr rope(Value x, Value p, RopeAttrs attrs, std::optional<Value> ff) {
  std::vector<Value> in{std::move(x), std::move(p)};
  if (ff) in.push_back(*ff);
  return mk(OpType::RoPE, std::move(in), attrs);
}
NodePtr sdpa(Value q, Value k, Value v, std::optional<Value> mask, bool causal, float scale, float logit_softcap, bool q8_0_scores) {
  std::vector<Value> in{std::move(q), std::move(k), std::move(v)};
  if (mask) in.push_back(*mask);
  return mk(OpType::ScaledDotProductAttention, std::move(in), SdpaAttrs{causal, scale, logit_softcap, q8_0_scores});
}

NodePtr paged_attention(const PagedAttentionInputs& i) {
  std::vector<Value> in{i.q, i.k, i.v, i.key_cache, i.value_cache, i.past_lens, i.subsequence_begins, i.block_indices,
                        i.block_indices_begins, i.max_context_len, i.scale, i.sliding_window, i.alibi_slopes};
  if (i.logit_softcap) in.push_back(*i.logit_softcap);
  return mk(OpType::PagedAttention, std::move(in));
}

}  // namespace ggflow::ir::ops
