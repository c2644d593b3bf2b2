// Data movement without index inputs: Reshape, Squeeze, Unsqueeze, Transpose, Concat,
// Broadcast, Tile. Shape rules keep symbols wherever the output dim provably equals an input
// dim (a copied dim, a special_zero 0, a -1 that cancels down to one symbol).
#include <algorithm>
#include <map>

#include "ir/infer_ctx.h"
#include "ir/kernel_util.h"
#include "ir/op_registry.h"

namespace ggflow::ir {

using Ports = Result<std::vector<PortType>>;
using Outs = Result<std::vector<Tensor>>;

static Result<void> check_shape_input(InferCtx& c, size_t i) {
  const Shape& s = c.shape(i);
  if (!is_integer(c.type(i))) return fail("input " + std::to_string(i) + " (a shape) must be integer");
  if (s.rank_known() && s.rank() != 1) return fail("input " + std::to_string(i) + " (a shape) must be 1-D, got " + s.str());
  return {};
}

// ---- Reshape(data, target): 0 copies the input dim (special_zero), -1 takes the rest.
Ports infer_Reshape(InferCtx& c) {
  if (auto r = check_shape_input(c, 1); !r) return r.error();
  bool sz = c.attrs<ReshapeAttrs>().special_zero;
  const Shape& in = c.shape(0);
  ElementType t = c.type(0);
  auto vals = c.sym_value(1);
  if (!vals) {
    const Shape& ts = c.shape(1);
    if (!ts.rank_known() || ts[0].is_dynamic()) return std::vector<PortType>{{t, Shape::dynamic_rank()}};
    std::vector<Dim> d;
    for (int64_t i = 0; i < ts[0].value(); ++i) d.push_back(c.fresh(static_cast<uint32_t>(i)));
    return std::vector<PortType>{{t, Shape(d)}};
  }
  std::vector<Dim> out;
  int64_t minus_one = -1;
  for (size_t i = 0; i < vals->size(); ++i) {
    const SymInt& v = (*vals)[i];
    if (v.is_sym()) out.push_back(Dim(v.sym));
    else if (v.value == 0 && sz) {
      if (!in.rank_known()) out.push_back(c.fresh(static_cast<uint32_t>(i)));
      else if (i >= in.rank())
        return fail("target " + std::to_string(i) + " is 0 (copy) but the input " + in.str() + " has no axis " + std::to_string(i));
      else out.push_back(in[i]);
    } else if (v.value == -1) {
      if (minus_one >= 0) return fail("target shape has more than one -1");
      minus_one = static_cast<int64_t>(i);
      out.push_back(Dim(1));  // placeholder
    } else if (v.value < 0) {
      return fail("target shape has " + std::to_string(v.value) + " at index " + std::to_string(i));
    } else out.push_back(Dim(v.value));
  }
  if (!in.rank_known()) {
    if (minus_one >= 0) out[minus_one] = c.fresh(static_cast<uint32_t>(minus_one));
    return std::vector<PortType>{{t, Shape(out)}};
  }
  // Cancel common symbols between input and output; what remains decides -1 or checks counts.
  std::multiset<uint32_t> in_syms, out_syms;
  int64_t in_p = 1, out_p = 1;
  for (const Dim& d : in.dims()) d.is_static() ? (void)(in_p *= d.value()) : (void)in_syms.insert(d.symbol().id());
  for (size_t i = 0; i < out.size(); ++i) {
    if (static_cast<int64_t>(i) == minus_one) continue;
    out[i].is_static() ? (void)(out_p *= out[i].value()) : (void)out_syms.insert(out[i].symbol().id());
  }
  for (auto it = out_syms.begin(); it != out_syms.end();) {
    auto f = in_syms.find(*it);
    if (f != in_syms.end()) { in_syms.erase(f); it = out_syms.erase(it); } else ++it;
  }
  if (minus_one >= 0) {
    if (in_syms.empty() && out_syms.empty()) {
      if (out_p == 0 || in_p % out_p != 0)
        return fail("cannot reshape " + in.str() + " into " + Shape(out).str() + " with -1 at " + std::to_string(minus_one));
      out[minus_one] = Dim(in_p / out_p);
    } else if (in_syms.size() == 1 && out_syms.empty() && in_p == out_p) {
      // assumes the symbol's length is not 0
      for (const Dim& d : in.dims())
        if (d.is_dynamic() && d.symbol().id() == *in_syms.begin()) out[minus_one] = d;
    } else out[minus_one] = c.fresh(static_cast<uint32_t>(minus_one));
  } else if (in_syms.empty() && out_syms.empty() && in_p != out_p) {
    return fail("cannot reshape " + in.str() + " (" + std::to_string(in_p) + " elements) into " +
                Shape(out).str() + " (" + std::to_string(out_p) + ")");
  }
  return std::vector<PortType>{{t, Shape(out)}};
}
Outs eval_Reshape(const Node& n, std::span<const Tensor> in) {
  std::vector<int64_t> tgt = in[1].to_i64();
  const auto& s = in[0].shape();
  int64_t known = 1, m1 = -1;
  for (size_t i = 0; i < tgt.size(); ++i) {
    if (tgt[i] == 0 && n.attrs<ReshapeAttrs>().special_zero) {
      if (i >= s.size()) return kernel_error(n, "target 0 at index " + std::to_string(i) + " beyond input rank");
      tgt[i] = s[i];
    }
    if (tgt[i] == -1) m1 = static_cast<int64_t>(i);
    else known *= tgt[i];
  }
  if (m1 >= 0) tgt[m1] = known ? in[0].numel() / known : 0;
  if (product(tgt) != in[0].numel())
    return kernel_error(n, "cannot reshape " + shape_str(s) + " into " + shape_str(tgt));
  return std::vector<Tensor>{in[0].reshaped(tgt)};
}

// ---- Squeeze(axes): removes listed axes (each 1), or every static 1 when axes is empty.
static Result<std::vector<bool>> squeezed_axes(const AxesAttrs& a, const Shape& in) {
  std::vector<bool> drop(in.rank(), false);
  if (a.axes.empty()) {
    for (size_t i = 0; i < in.rank(); ++i) drop[i] = in[i].is(1);
    return drop;
  }
  auto ax = normalize_axes(a.axes, static_cast<int64_t>(in.rank()), "squeeze axis");
  if (!ax) return ax.error();
  for (int64_t x : *ax) {
    if (in[x].is_static() && !in[x].is(1))
      return fail("cannot squeeze axis " + std::to_string(x) + " of " + in.str() + ": its length is " + in[x].str());
    drop[x] = true;
  }
  return drop;
}
Ports infer_Squeeze(InferCtx& c) {
  const Shape& in = c.shape(0);
  if (!in.rank_known()) return std::vector<PortType>{{c.type(0), in}};
  auto drop = squeezed_axes(c.attrs<AxesAttrs>(), in);
  if (!drop) return drop.error();
  std::vector<Dim> out;
  for (size_t i = 0; i < in.rank(); ++i)
    if (!(*drop)[i]) out.push_back(in[i]);
  return std::vector<PortType>{{c.type(0), Shape(out)}};
}
Outs eval_Squeeze(const Node& n, std::span<const Tensor> in) {
  // with no axes, squeeze what inference squeezed (static 1s), not a dynamic dim that is 1 now
  const Shape& declared = n.input(0).shape();
  Shape actual = Shape::from(in[0].shape());
  if (n.attrs<AxesAttrs>().axes.empty() && declared.rank_known() && declared.rank() == actual.rank())
    for (size_t i = 0; i < actual.rank(); ++i)
      if (declared[i].is_dynamic()) actual[i] = declared[i];
  auto drop = squeezed_axes(n.attrs<AxesAttrs>(), actual);
  if (!drop) return kernel_error(n, drop.error().what);
  std::vector<int64_t> out;
  for (size_t i = 0; i < in[0].rank(); ++i)
    if (!(*drop)[i]) out.push_back(in[0].shape()[i]);
  return std::vector<Tensor>{in[0].reshaped(out)};
}

// ---- Unsqueeze(axes): axes are positions in the output.
static Result<std::vector<bool>> inserted_axes(const AxesAttrs& a, size_t in_rank) {
  int64_t r = static_cast<int64_t>(in_rank + a.axes.size());
  if (a.axes.empty()) return fail("unsqueeze needs at least one axis");
  auto ax = normalize_axes(a.axes, r, "unsqueeze axis");
  if (!ax) return ax.error();
  std::vector<bool> ins(r, false);
  for (int64_t x : *ax) ins[x] = true;
  return ins;
}
Ports infer_Unsqueeze(InferCtx& c) {
  const Shape& in = c.shape(0);
  if (!in.rank_known()) return std::vector<PortType>{{c.type(0), in}};
  auto ins = inserted_axes(c.attrs<AxesAttrs>(), in.rank());
  if (!ins) return ins.error();
  std::vector<Dim> out;
  size_t k = 0;
  for (bool b : *ins) out.push_back(b ? Dim(1) : in[k++]);
  return std::vector<PortType>{{c.type(0), Shape(out)}};
}
Outs eval_Unsqueeze(const Node& n, std::span<const Tensor> in) {
  auto ins = inserted_axes(n.attrs<AxesAttrs>(), in[0].rank());
  if (!ins) return kernel_error(n, ins.error().what);
  std::vector<int64_t> out;
  size_t k = 0;
  for (bool b : *ins) out.push_back(b ? 1 : in[0].shape()[k++]);
  return std::vector<Tensor>{in[0].reshaped(out)};
}

// ---- Transpose(perm): output axis i is input axis perm[i]; empty perm reverses.
static Result<std::vector<int64_t>> perm_of(const TransposeAttrs& a, size_t rank) {
  std::vector<int64_t> p = a.perm;
  if (p.empty())
    for (size_t i = rank; i-- > 0;) p.push_back(static_cast<int64_t>(i));
  if (p.size() != rank) return fail("perm " + join(p) + " does not have rank " + std::to_string(rank) + " entries");
  auto ax = normalize_axes(p, static_cast<int64_t>(rank), "perm entry");
  if (!ax) return ax.error();
  return *ax;
}
Ports infer_Transpose(InferCtx& c) {
  const Shape& in = c.shape(0);
  if (!in.rank_known()) return std::vector<PortType>{{c.type(0), in}};
  auto p = perm_of(c.attrs<TransposeAttrs>(), in.rank());
  if (!p) return p.error();
  std::vector<Dim> out;
  for (int64_t a : *p) out.push_back(in[a]);
  return std::vector<PortType>{{c.type(0), Shape(out)}};
}
Outs eval_Transpose(const Node& n, std::span<const Tensor> in) {
  const auto& s = in[0].shape();
  auto p = perm_of(n.attrs<TransposeAttrs>(), s.size());
  if (!p) return kernel_error(n, p.error().what);
  std::vector<int64_t> out(s.size()), ist = strides_of(s), map;
  for (size_t i = 0; i < s.size(); ++i) out[i] = s[(*p)[i]];
  map.reserve(product(out));
  for_each_index(out, [&](const std::vector<int64_t>& idx, int64_t) {
    int64_t k = 0;
    for (size_t i = 0; i < idx.size(); ++i) k += idx[i] * ist[(*p)[i]];
    map.push_back(k);
  });
  return std::vector<Tensor>{take_elements(in[0], out, map)};
}

// ---- Concat(axis): inputs agree on every other axis and on type.
Ports infer_Concat(InferCtx& c) {
  ElementType t = c.type(0);
  const Shape* ref = nullptr;
  for (size_t i = 0; i < c.n_in(); ++i) {
    if (c.type(i) != t)
      return fail("input " + std::to_string(i) + " is " + std::string(to_string(c.type(i))) + ", input 0 is " + std::string(to_string(t)));
    if (!c.shape(i).rank_known()) return std::vector<PortType>{{t, Shape::dynamic_rank()}};
    if (!ref) ref = &c.shape(i);
    else if (c.shape(i).rank() != ref->rank())
      return fail("inputs have ranks " + std::to_string(ref->rank()) + " and " + std::to_string(c.shape(i).rank()));
  }
  auto ax = normalize_axis(c.attrs<AxisAttrs>().axis, static_cast<int64_t>(ref->rank()), "concat axis");
  if (!ax) return ax.error();
  std::vector<Dim> out = ref->dims();
  int64_t stat = 0;
  std::vector<Dim> syms;
  for (size_t i = 0; i < c.n_in(); ++i) {
    const Shape& s = c.shape(i);
    for (size_t a = 0; a < s.rank(); ++a) {
      if (static_cast<int64_t>(a) == *ax) continue;
      if (!same_or_dynamic(out[a], s[a]))
        return fail("input " + std::to_string(i) + " " + s.str() + " does not match " + ref->str() + " at axis " + std::to_string(a));
      if (out[a].is_dynamic() && s[a].is_static()) out[a] = s[a];
    }
    s[*ax].is_static() ? (void)(stat += s[*ax].value()) : syms.push_back(s[*ax]);
  }
  if (syms.empty()) out[*ax] = Dim(stat);
  else if (syms.size() == 1 && stat == 0) out[*ax] = syms[0];
  else out[*ax] = c.fresh(0);
  return std::vector<PortType>{{t, Shape(out)}};
}
Outs eval_Concat(const Node& n, std::span<const Tensor> in) {
  int64_t r = static_cast<int64_t>(in[0].rank());
  auto ax = normalize_axis(n.attrs<AxisAttrs>().axis, r, "concat axis");
  if (!ax) return kernel_error(n, ax.error().what);
  std::vector<int64_t> out = in[0].shape();
  out[*ax] = 0;
  for (const Tensor& t : in) {
    for (int64_t a = 0; a < r; ++a)
      if (a != *ax && t.shape()[a] != out[a]) return kernel_error(n, "inputs disagree: " + shape_str(t.shape()));
    out[*ax] += t.shape()[*ax];
  }
  Tensor y(in[0].type(), out);
  int64_t outer = product({out.begin(), out.begin() + *ax});
  size_t es = scalar_size(in[0].type());
  uint8_t* o = y.mutable_bytes();
  for (int64_t k = 0; k < outer; ++k)
    for (const Tensor& t : in) {
      size_t chunk = static_cast<size_t>(t.numel() / std::max<int64_t>(outer, 1)) * es;
      if (outer == 0) break;
      std::memcpy(o, t.bytes() + k * chunk, chunk);
      o += chunk;
    }
  return std::vector<Tensor>{y};
}

// ---- Broadcast(data, target_shape): bidirectional numpy broadcast to the target.
Ports infer_Broadcast(InferCtx& c) {
  if (auto r = check_shape_input(c, 1); !r) return r.error();
  auto vals = c.sym_value(1);
  Shape target;
  if (vals) {
    for (const SymInt& v : *vals) {
      if (!v.is_sym() && v.value < 0) return fail("target shape has " + std::to_string(v.value));
      target.dims().push_back(v.dim());
    }
  } else {
    const Shape& ts = c.shape(1);
    if (!ts.rank_known() || ts[0].is_dynamic()) return std::vector<PortType>{{c.type(0), Shape::dynamic_rank()}};
    for (int64_t i = 0; i < ts[0].value(); ++i) target.dims().push_back(c.fresh(100 + static_cast<uint32_t>(i)));
  }
  auto out = broadcast_shapes(c, {c.shape(0), target});
  if (!out) return out.error();
  return std::vector<PortType>{{c.type(0), *out}};
}
Outs eval_Broadcast(const Node& n, std::span<const Tensor> in) {
  auto out = broadcast_static({in[0].shape(), in[1].to_i64()});
  if (!out) return kernel_error(n, out.error().what);
  return std::vector<Tensor>{take_elements(in[0], *out, broadcast_map(*out, in[0].shape()))};
}

// ---- Tile(repeats): one repeat count per axis.
Ports infer_Tile(InferCtx& c) {
  const auto& rep = c.attrs<TileAttrs>().repeats;
  const Shape& in = c.shape(0);
  if (!in.rank_known()) return std::vector<PortType>{{c.type(0), in}};
  if (rep.size() != in.rank()) return fail("repeats " + join(rep) + " do not match rank of " + in.str());
  std::vector<Dim> out;
  for (size_t i = 0; i < rep.size(); ++i) {
    if (rep[i] < 0) return fail("negative repeat " + std::to_string(rep[i]));
    if (in[i].is_static()) out.push_back(Dim(in[i].value() * rep[i]));
    else out.push_back(rep[i] == 1 ? in[i] : rep[i] == 0 ? Dim(0) : c.fresh(static_cast<uint32_t>(i)));
  }
  return std::vector<PortType>{{c.type(0), Shape(out)}};
}
Outs eval_Tile(const Node& n, std::span<const Tensor> in) {
  const auto& rep = n.attrs<TileAttrs>().repeats;
  const auto& s = in[0].shape();
  std::vector<int64_t> out(s.size()), ist = strides_of(s), map;
  for (size_t i = 0; i < s.size(); ++i) out[i] = s[i] * rep[i];
  for_each_index(out, [&](const std::vector<int64_t>& idx, int64_t) {
    int64_t k = 0;
    for (size_t i = 0; i < idx.size(); ++i) k += (idx[i] % s[i]) * ist[i];
    map.push_back(k);
  });
  return std::vector<Tensor>{take_elements(in[0], out, map)};
}

}  // namespace ggflow::ir
