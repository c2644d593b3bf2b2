// Sources, sinks, casts and shapes-as-values: Parameter, Constant, Result, Convert, ShapeOf,
// Range, ReadValue, Assign. Parameter, ReadValue and Assign touch the evaluator's inputs and
// state, so the evaluator runs them itself; their kernels here only refuse.
#include <cmath>

#include "gguf/quantize.h"
#include "ir/infer_ctx.h"
#include "ir/kernel_util.h"
#include "ir/op_registry.h"

namespace ggflow::ir {

using Ports = Result<std::vector<PortType>>;
using Outs = Result<std::vector<Tensor>>;

Ports infer_Parameter(InferCtx& c) {
  const auto& a = c.attrs<ParameterAttrs>();
  // q8_0: a paged KV cache (key_cache.N / value_cache.N) of GGML q8_0 blocks along the last axis
  if (a.type == ElementType::q8_0 && a.shape.rank_known() && a.shape.rank() > 0 && a.shape[a.shape.rank() - 1].is_static() &&
      a.shape[a.shape.rank() - 1].value() % 32 == 0)
    return std::vector<PortType>{{a.type, a.shape}};
  if (a.type == ElementType::undefined || is_block(a.type))
    return fail("a Parameter must have a plain element type (or q8_0 with a last axis of whole 32-value blocks), not " +
                std::string(to_string(a.type)) + " " + a.shape.str());
  return std::vector<PortType>{{a.type, a.shape}};
}
Outs eval_Parameter(const Node& n, std::span<const Tensor>) {
  return kernel_error(n, "parameters are bound by the evaluator");
}

Ports infer_Constant(InferCtx& c) {
  const Tensor& t = c.attrs<ConstantAttrs>().value;
  if (t.type() == ElementType::undefined) return fail("constant holds no tensor");
  return std::vector<PortType>{{t.type(), Shape::from(t.shape())}};
}
Outs eval_Constant(const Node& n, std::span<const Tensor>) {
  return std::vector<Tensor>{n.attrs<ConstantAttrs>().value};
}

Ports infer_Result(InferCtx& c) { return std::vector<PortType>{{c.type(0), c.shape(0)}}; }
Outs eval_Result(const Node&, std::span<const Tensor> in) { return std::vector<Tensor>{in[0]}; }

// Convert: between plain types, a block type to f32 (dequantize), and f32 to q8_0 along the last
// axis (gguf/quantize.h: the KV cache's q8_0 rounding; the last axis a multiple of 32).
Ports infer_Convert(InferCtx& c) {
  ElementType to = c.attrs<TypeAttrs>().type;
  if (to == ElementType::q8_0 && c.type(0) == ElementType::f32) {
    const Shape& s = c.shape(0);
    if (s.rank_known() && (s.rank() == 0 || (s[s.rank() - 1].is_static() && s[s.rank() - 1].value() % 32 != 0)))
      return fail("f32 " + s.str() + " to q8_0: the last axis must be a multiple of 32", "quantize whole rows of 32-value blocks");
    return std::vector<PortType>{{to, s}};
  }
  if (to == ElementType::undefined || is_block(to))
    return fail("cannot convert to " + std::string(to_string(to)), "convert to a plain type, or f32 to q8_0");
  if (is_block(c.type(0)) && to != ElementType::f32)
    return fail("a block type converts only to f32, not " + std::string(to_string(to)));
  return std::vector<PortType>{{to, c.shape(0)}};
}
Outs eval_Convert(const Node& n, std::span<const Tensor> in) {
  ElementType to = n.attrs<TypeAttrs>().type;
  const Tensor& x = in[0];
  if (to == ElementType::q8_0) {
    if (x.shape().empty() || x.shape().back() % 32 != 0) return kernel_error(n, "q8_0 needs rows of a multiple of 32 values");
    Tensor y(to, x.shape());
    const std::vector<float> f = x.to_f32();
    gguf::quantize_q8_0(f.data(), x.numel(), y.mutable_bytes());
    return std::vector<Tensor>{y};
  }
  if (is_float(to) || is_block(x.type())) return std::vector<Tensor>{Tensor::from_f32(to, x.shape(), x.to_f32())};
  Tensor y(to, x.shape());
  size_t si = scalar_size(x.type()), so = scalar_size(to);
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (is_float(x.type())) store_f32(to, y.mutable_bytes() + i * so, load_f32(x.type(), x.bytes() + i * si));
    else store_i64(to, y.mutable_bytes() + i * so, load_i64(x.type(), x.bytes() + i * si));
  }
  return std::vector<Tensor>{y};
}

Ports infer_ShapeOf(InferCtx& c) {
  ElementType t = c.attrs<TypeAttrs>().type;
  if (t != ElementType::i64 && t != ElementType::i32) return fail("output type must be i64 or i32");
  if (!c.shape(0).rank_known()) return std::vector<PortType>{{t, Shape{c.fresh(0)}}};
  return std::vector<PortType>{{t, Shape{Dim(static_cast<int64_t>(c.shape(0).rank()))}}};
}
Outs eval_ShapeOf(const Node& n, std::span<const Tensor> in) {
  const auto& s = in[0].shape();
  return std::vector<Tensor>{Tensor::from_i64(n.attrs<TypeAttrs>().type, {static_cast<int64_t>(s.size())}, s)};
}

// Range(start, stop, step): scalars (or [1]); length ceil((stop - start) / step), at least 0.
Ports infer_Range(InferCtx& c) {
  ElementType t = c.attrs<TypeAttrs>().type;
  if (is_block(t) || t == ElementType::boolean || t == ElementType::undefined)
    return fail("output type must be numeric");
  for (size_t i = 0; i < 3; ++i) {
    const Shape& s = c.shape(i);
    if (s.rank_known() && !(s.rank() == 0 || (s.rank() == 1 && s[0].is(1))))
      return fail("input " + std::to_string(i) + " must be a scalar, got " + s.str());
  }
  auto start = c.sym_value(0), stop = c.sym_value(1), step = c.sym_value(2);
  if (start && stop && step && !(*start)[0].is_sym() && !(*stop)[0].is_sym() && !(*step)[0].is_sym() &&
      is_integer(c.type(0))) {
    int64_t b = (*start)[0].value, e = (*stop)[0].value, s = (*step)[0].value;
    if (s == 0) return fail("step is 0");
    int64_t n = s > 0 ? (e - b + s - 1) / s : (b - e - s - 1) / -s;
    return std::vector<PortType>{{t, Shape{Dim(std::max<int64_t>(0, n))}}};
  }
  if (start && step && stop && (*stop)[0].is_sym() && !(*start)[0].is_sym() && (*start)[0].value == 0 &&
      !(*step)[0].is_sym() && (*step)[0].value == 1)
    return std::vector<PortType>{{t, Shape{(*stop)[0].dim()}}};
  return std::vector<PortType>{{t, Shape{c.fresh(0)}}};
}
Outs eval_Range(const Node& n, std::span<const Tensor> in) {
  ElementType t = n.attrs<TypeAttrs>().type;
  double b = in[0].to_f32()[0], e = in[1].to_f32()[0], s = in[2].to_f32()[0];
  if (!is_float(in[0].type())) {
    b = static_cast<double>(in[0].to_i64()[0]);
    e = static_cast<double>(in[1].to_i64()[0]);
    s = static_cast<double>(in[2].to_i64()[0]);
  }
  if (s == 0) return kernel_error(n, "step is 0");
  int64_t len = std::max<int64_t>(0, static_cast<int64_t>(std::ceil((e - b) / s)));
  std::vector<float> vf;
  std::vector<int64_t> vi;
  for (int64_t i = 0; i < len; ++i) {
    vf.push_back(static_cast<float>(b + s * static_cast<double>(i)));
    vi.push_back(static_cast<int64_t>(b) + static_cast<int64_t>(s) * i);
  }
  if (is_float(t)) return std::vector<Tensor>{Tensor::from_f32(t, {len}, vf)};
  return std::vector<Tensor>{Tensor::from_i64(t, {len}, vi)};
}

static Result<void> check_variable_value(const VariableAttrs& a, ElementType t, const Shape& s,
                                         const char* what) {
  if (t != a.type)
    return fail(std::string(what) + " has type " + std::string(to_string(t)) + ", variable '" + a.id +
                "' holds " + std::string(to_string(a.type)));
  if (s.rank_known() && a.shape.rank_known()) {
    bool ok = s.rank() == a.shape.rank();
    for (size_t i = 0; ok && i < s.rank(); ++i) ok = same_or_dynamic(s[i], a.shape[i]);
    if (!ok)
      return fail(std::string(what) + " has shape " + s.str() + ", variable '" + a.id + "' is " +
                  a.shape.str());
  }
  return {};
}

Ports infer_ReadValue(InferCtx& c) {
  const auto& a = c.attrs<VariableAttrs>();
  if (a.id.empty()) return fail("variable id is empty");
  if (c.n_in() == 1)
    if (auto r = check_variable_value(a, c.type(0), c.shape(0), "the init value"); !r) return r.error();
  return std::vector<PortType>{{a.type, a.shape}};
}
Outs eval_ReadValue(const Node& n, std::span<const Tensor>) {
  return kernel_error(n, "variables are read by the evaluator");
}

Ports infer_Assign(InferCtx& c) {
  const auto& a = c.attrs<VariableAttrs>();
  if (a.id.empty()) return fail("variable id is empty");
  if (auto r = check_variable_value(a, c.type(0), c.shape(0), "the assigned value"); !r) return r.error();
  return std::vector<PortType>{};
}
Outs eval_Assign(const Node& n, std::span<const Tensor>) {
  return kernel_error(n, "variables are written by the evaluator");
}

}  // namespace ggflow::ir
