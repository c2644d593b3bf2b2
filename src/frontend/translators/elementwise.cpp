// Elementwise GGML ops: ADD, MUL (b repeats to a), SCALE, UNARY, GLU.
//   ADD/MUL:  numpy broadcasting covers GGML's repeat when b's extents are 1 or equal; a b that
//             repeats a whole number of times > 1 is tiled first (static extents only).
//   SCALE:    x * s (+ b)
//   UNARY:    SILU = Swish, GELU = Gelu(tanh) (GGML's GELU is the tanh form), GELU_ERF, TANH
//   GLU:      act(gate) * up; the one-input form splits ne0 in halves (gate first unless swapped)
#include "frontend/translate_ctx.h"
#include "ir/ops.h"

namespace ggflow::frontend {

namespace {

Result<ir::Value> repeat_to(TranslateContext& c, ir::Value b, const ir::Shape& a) {
  const ir::Shape& s = b.shape();
  if (!s.rank_known() || !a.rank_known() || s.rank() > a.rank()) return b;
  std::vector<int64_t> reps(s.rank(), 1);
  bool tile = false;
  for (size_t i = 0; i < s.rank(); ++i) {
    const ir::Dim &d = s[i], &t = a[a.rank() - s.rank() + i];
    if (d == t || d.is(1)) continue;
    if (!d.is_static() || !t.is_static() || t.value() % d.value() != 0)
      return c.error("cannot repeat " + s.str() + " to " + a.str());
    reps[i] = t.value() / d.value();
    tile = true;
  }
  if (!tile) return b;
  return ir::Value(ir::ops::tile(b, reps));
}

ir::NodePtr act(GgmlUnary op, ir::Value x) {
  switch (op) {
    case GgmlUnary::SILU: return ir::ops::swish(x);
    case GgmlUnary::GELU: return ir::ops::gelu(x, ir::GeluMode::tanh_f16);  // ggml-cpu's GELU: its f16 table
    case GgmlUnary::GELU_ERF: return ir::ops::gelu(x, ir::GeluMode::erf);
    case GgmlUnary::TANH: return ir::ops::tanh(x);
  }
  return nullptr;
}

GgmlUnary glu_act(GgmlGlu g) {
  return g == GgmlGlu::SWIGLU ? GgmlUnary::SILU : g == GgmlGlu::GEGLU ? GgmlUnary::GELU : GgmlUnary::GELU_ERF;
}

}  // namespace

Result<ir::Value> translate_ADD(TranslateContext& c) {
  auto b = repeat_to(c, c.in(1), c.in(0).shape());
  if (!b) return b.error();
  return ir::Value(ir::ops::add(c.in(0), *b));
}

Result<ir::Value> translate_MUL(TranslateContext& c) {
  auto b = repeat_to(c, c.in(1), c.in(0).shape());
  if (!b) return b.error();
  return ir::Value(ir::ops::multiply(c.in(0), *b));
}

Result<ir::Value> translate_SCALE(TranslateContext& c) {
  const auto& p = c.tensor().p<ScaleParams>();
  ir::NodePtr y = ir::ops::multiply(c.in(0), ir::ops::scalar_f32(p.s));
  if (p.b != 0.0f) y = ir::ops::add(y, ir::ops::scalar_f32(p.b));
  return ir::Value(y);
}

Result<ir::Value> translate_UNARY(TranslateContext& c) {
  return ir::Value(act(c.tensor().p<UnaryParams>().op, c.in(0)));
}

Result<ir::Value> translate_GLU(TranslateContext& c) {
  const auto& p = c.tensor().p<GluParams>();
  ir::Value gate, up;
  if (c.n_src() == 2) {
    gate = c.in(0), up = c.in(1);
  } else {
    const Ext& n0 = c.src(0).ne[0];
    auto halves = ir::ops::variadic_split(c.in(0), -1, {n0.n / 2, n0.n / 2});
    gate = ir::Value(halves, p.swapped ? 1 : 0);
    up = ir::Value(halves, p.swapped ? 0 : 1);
  }
  return ir::Value(ir::ops::multiply(act(glu_act(p.op), gate), up));
}

}  // namespace ggflow::frontend
