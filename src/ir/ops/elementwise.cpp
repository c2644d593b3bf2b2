// Elementwise ops with numpy broadcasting: arithmetic, comparisons, logic, Select and the unary
// math functions. Floats compute in f32 and round once to the output type; integers compute in
// i64 (Divide floors, as Python does). The broadcast guard (verifier.cpp) watches these ops.
#include <cmath>
#include <functional>

#include "ir/gelu_f16.h"
#include "ir/infer_ctx.h"
#include "ir/kernel_util.h"
#include "ir/op_registry.h"

namespace ggflow::ir {

using Ports = Result<std::vector<PortType>>;
using Outs = Result<std::vector<Tensor>>;

namespace {
enum class Kind { arith, compare, logical };

Ports infer_binary(InferCtx& c, Kind k) {
  ElementType a = c.type(0), b = c.type(1);
  if (a != b)
    return fail("operand types differ: " + std::string(to_string(a)) + " and " + std::string(to_string(b)),
                "insert a Convert");
  if (is_block(a)) return fail("operands of type " + std::string(to_string(a)) + " are not computable");
  if (k == Kind::logical && a != ElementType::boolean) return fail("operands must be boolean");
  if (k == Kind::arith && a == ElementType::boolean) return fail("arithmetic on boolean operands");
  auto s = broadcast_shapes(c, {c.shape(0), c.shape(1)});
  if (!s) return s.error();
  return std::vector<PortType>{{k == Kind::arith ? a : ElementType::boolean, *s}};
}

Outs eval_binary(const Node& n, std::span<const Tensor> in, Kind k,
                 float (*ff)(float, float), Result<int64_t> (*fi)(int64_t, int64_t)) {
  auto out = broadcast_static({in[0].shape(), in[1].shape()});
  if (!out) return kernel_error(n, out.error().what);
  auto ma = broadcast_map(*out, in[0].shape()), mb = broadcast_map(*out, in[1].shape());
  ElementType t = in[0].type();
  ElementType ot = k == Kind::arith ? t : ElementType::boolean;
  Tensor y(ot, *out);
  size_t es = scalar_size(ot);
  uint8_t* o = y.mutable_bytes();
  if (is_float(t)) {
    auto a = in[0].to_f32(), b = in[1].to_f32();
    for (size_t e = 0; e < ma.size(); ++e) store_f32(ot, o + e * es, ff(a[ma[e]], b[mb[e]]));
  } else {
    auto a = in[0].to_i64(), b = in[1].to_i64();
    for (size_t e = 0; e < ma.size(); ++e) {
      auto r = fi(a[ma[e]], b[mb[e]]);
      if (!r) return kernel_error(n, r.error().what);
      store_i64(ot, o + e * es, *r);
    }
  }
  return std::vector<Tensor>{y};
}

Result<int64_t> ipow(int64_t a, int64_t b) {
  if (b < 0) return fail("integer power with a negative exponent");
  int64_t r = 1;
  for (int64_t i = 0; i < b; ++i) r *= a;
  return r;
}
Result<int64_t> idiv(int64_t a, int64_t b) {
  if (b == 0) return fail("integer division by zero");
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

Ports infer_unary(InferCtx& c) {
  if (!is_float(c.type(0))) return fail("input must be f32, f16 or bf16, not " + std::string(to_string(c.type(0))));
  return std::vector<PortType>{{c.type(0), c.shape(0)}};
}
Outs eval_unary(const Node&, std::span<const Tensor> in, float (*f)(float)) {
  auto x = in[0].to_f32();
  for (float& v : x) v = f(v);
  return std::vector<Tensor>{Tensor::from_f32(in[0].type(), in[0].shape(), x)};
}
}  // namespace

#define GGFLOW_BINARY(Name, kind, fexpr, iexpr)                                       \
  Ports infer_##Name(InferCtx& c) { return infer_binary(c, Kind::kind); }            \
  Outs eval_##Name(const Node& n, std::span<const Tensor> in) {                      \
    return eval_binary(n, in, Kind::kind, [](float a, float b) -> float { return fexpr; }, \
                       [](int64_t a, int64_t b) -> Result<int64_t> { return iexpr; }); \
  }
GGFLOW_BINARY(Add, arith, a + b, a + b)
GGFLOW_BINARY(Subtract, arith, a - b, a - b)
GGFLOW_BINARY(Multiply, arith, a * b, a * b)
GGFLOW_BINARY(Divide, arith, a / b, idiv(a, b))
GGFLOW_BINARY(Power, arith, std::pow(a, b), ipow(a, b))
GGFLOW_BINARY(Maximum, arith, std::fmax(a, b), std::max(a, b))
GGFLOW_BINARY(Equal, compare, a == b ? 1.0f : 0.0f, int64_t(a == b))
GGFLOW_BINARY(Less, compare, a < b ? 1.0f : 0.0f, int64_t(a < b))
GGFLOW_BINARY(LessEqual, compare, a <= b ? 1.0f : 0.0f, int64_t(a <= b))
GGFLOW_BINARY(GreaterEqual, compare, a >= b ? 1.0f : 0.0f, int64_t(a >= b))
GGFLOW_BINARY(LogicalAnd, logical, (a != 0 && b != 0) ? 1.0f : 0.0f, int64_t(a != 0 && b != 0))
#undef GGFLOW_BINARY

// ---- Select(cond, then, else): numpy broadcasting of all three.
Ports infer_Select(InferCtx& c) {
  if (c.type(0) != ElementType::boolean) return fail("condition must be boolean, not " + std::string(to_string(c.type(0))));
  if (c.type(1) != c.type(2))
    return fail("branches differ: " + std::string(to_string(c.type(1))) + " and " + std::string(to_string(c.type(2))));
  auto s = broadcast_shapes(c, {c.shape(0), c.shape(1), c.shape(2)});
  if (!s) return s.error();
  return std::vector<PortType>{{c.type(1), *s}};
}
Outs eval_Select(const Node& n, std::span<const Tensor> in) {
  auto out = broadcast_static({in[0].shape(), in[1].shape(), in[2].shape()});
  if (!out) return kernel_error(n, out.error().what);
  auto mc = broadcast_map(*out, in[0].shape()), ma = broadcast_map(*out, in[1].shape()),
       mb = broadcast_map(*out, in[2].shape());
  Tensor y(in[1].type(), *out);
  size_t es = scalar_size(in[1].type());
  for (size_t e = 0; e < mc.size(); ++e) {
    const Tensor& src = in[0].bytes()[mc[e]] ? in[1] : in[2];
    std::memcpy(y.mutable_bytes() + e * es, src.bytes() + (&src == &in[1] ? ma[e] : mb[e]) * es, es);
  }
  return std::vector<Tensor>{y};
}

#define GGFLOW_UNARY(Name, expr)                                            \
  Ports infer_##Name(InferCtx& c) { return infer_unary(c); }               \
  Outs eval_##Name(const Node& n, std::span<const Tensor> in) {            \
    return eval_unary(n, in, [](float x) -> float { return expr; });       \
  }
GGFLOW_UNARY(Sqrt, std::sqrt(x))
GGFLOW_UNARY(Exp, std::exp(x))
GGFLOW_UNARY(Tanh, std::tanh(x))
GGFLOW_UNARY(Sin, std::sin(x))
GGFLOW_UNARY(Cos, std::cos(x))
GGFLOW_UNARY(Swish, x / (1.0f + std::exp(-x)))  // SiLU: x * sigmoid(x)
#undef GGFLOW_UNARY

// ---- Gelu: erf form 0.5 x (1 + erf(x / sqrt 2)); tanh form with sqrt(2/pi) (x + 0.044715 x^3);
// tanh_f16: GGML's table of f16 values (ir/gelu_f16.h).
Ports infer_Gelu(InferCtx& c) { return infer_unary(c); }
Outs eval_Gelu(const Node& n, std::span<const Tensor> in) {
  if (n.attrs<GeluAttrs>().mode == GeluMode::tanh_f16) return eval_unary(n, in, [](float x) -> float { return gelu_f16(x); });
  if (n.attrs<GeluAttrs>().mode == GeluMode::erf)
    return eval_unary(n, in, [](float x) -> float { return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f)); });
  return eval_unary(n, in, [](float x) -> float {
    return 0.5f * x * (1.0f + std::tanh(0.79788456080286536f * x * (1.0f + 0.044715f * x * x)));
  });
}

}  // namespace ggflow::ir
