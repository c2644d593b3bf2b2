// Data movement with indices: Gather (axis, batch_dims; rows of a block-type table dequantize
// to f32), Slice (numpy slicing per axis), VariadicSplit, ScatterUpdate.
#include <algorithm>
#include <climits>

#include "gguf/dequant.h"
#include "ir/infer_ctx.h"
#include "ir/kernel_util.h"
#include "ir/op_registry.h"

namespace ggflow::ir {

using Ports = Result<std::vector<PortType>>;
using Outs = Result<std::vector<Tensor>>;

// ---- Gather(data, indices): out = data[:axis] + indices[batch_dims:] + data[axis+1:]
Ports infer_Gather(InferCtx& c) {
  const auto& a = c.attrs<GatherAttrs>();
  const Shape &d = c.shape(0), &ix = c.shape(1);
  if (!is_integer(c.type(1))) return fail("indices must be integer, not " + std::string(to_string(c.type(1))));
  ElementType t = c.type(0);
  if (!d.rank_known() || !ix.rank_known()) return std::vector<PortType>{{is_block(t) ? ElementType::f32 : t, Shape::dynamic_rank()}};
  auto axis = normalize_axis(a.axis, static_cast<int64_t>(d.rank()), "gather axis");
  if (!axis) return axis.error();
  int64_t b = a.batch_dims < 0 ? a.batch_dims + static_cast<int64_t>(ix.rank()) : a.batch_dims;
  if (b < 0 || b > static_cast<int64_t>(ix.rank()) || b > *axis)
    return fail("batch_dims " + std::to_string(a.batch_dims) + " must be in [0, min(axis, indices rank)]");
  for (int64_t i = 0; i < b; ++i)
    if (!same_or_dynamic(d[i], ix[i]))
      return fail("batch dim " + std::to_string(i) + " differs: data " + d.str() + ", indices " + ix.str());
  if (is_block(t)) {
    if (d.rank() != 2 || *axis != 0 || b != 0)
      return fail("a " + std::string(to_string(t)) + " table gathers rows only (rank 2, axis 0)");
    t = ElementType::f32;
  }
  std::vector<Dim> out(d.dims().begin(), d.dims().begin() + *axis);
  out.insert(out.end(), ix.dims().begin() + b, ix.dims().end());
  out.insert(out.end(), d.dims().begin() + *axis + 1, d.dims().end());
  return std::vector<PortType>{{t, Shape(out)}};
}
Outs eval_Gather(const Node& n, std::span<const Tensor> in) {
  const auto& a = n.attrs<GatherAttrs>();
  const auto &ds = in[0].shape(), &is = in[1].shape();
  int64_t axis = a.axis < 0 ? a.axis + static_cast<int64_t>(ds.size()) : a.axis;
  int64_t b = a.batch_dims < 0 ? a.batch_dims + static_cast<int64_t>(is.size()) : a.batch_dims;
  int64_t B = product({ds.begin(), ds.begin() + b}), P = product({ds.begin() + b, ds.begin() + axis});
  int64_t N = ds[axis], S = product({ds.begin() + axis + 1, ds.end()}), I = product({is.begin() + b, is.end()});
  std::vector<int64_t> out(ds.begin(), ds.begin() + axis);
  out.insert(out.end(), is.begin() + b, is.end());
  out.insert(out.end(), ds.begin() + axis + 1, ds.end());
  std::vector<int64_t> idx = in[1].to_i64();
  bool block = is_block(in[0].type());
  Tensor y(block ? ElementType::f32 : in[0].type(), out);
  size_t es = block ? 4 : scalar_size(in[0].type());
  size_t row_bytes = byte_size(in[0].type(), S);  // block: one row of the table
  uint8_t* o = y.mutable_bytes();
  for (int64_t bb = 0; bb < B; ++bb)
    for (int64_t p = 0; p < P; ++p)
      for (int64_t i = 0; i < I; ++i) {
        int64_t k = idx[bb * I + i];
        if (k < 0) k += N;
        if (k < 0 || k >= N)
          return kernel_error(n, "index " + std::to_string(idx[bb * I + i]) + " is out of range [0, " + std::to_string(N) + ")",
                              "check the token ids against the vocabulary size");
        int64_t src = (bb * P + p) * N + k;
        if (block) {
          Status st = gguf::dequantize(*to_ggml(in[0].type()), {in[0].bytes() + src * row_bytes, row_bytes},
                                       static_cast<uint64_t>(S), reinterpret_cast<float*>(o));
          if (!st) return kernel_error(n, st.error().what);
        } else {
          std::memcpy(o, in[0].bytes() + src * S * es, S * es);
        }
        o += S * es;
      }
  return std::vector<Tensor>{y};
}

// ---- Slice: python slice semantics on each listed axis.
Ports infer_Slice(InferCtx& c) {
  const auto& a = c.attrs<SliceAttrs>();
  const Shape& in = c.shape(0);
  if (!in.rank_known()) return std::vector<PortType>{{c.type(0), in}};
  auto ax = slice_axes(a, in.rank());
  if (!ax) return ax.error();
  std::vector<Dim> out = in.dims();
  for (size_t i = 0; i < ax->size(); ++i) {
    int64_t x = (*ax)[i];
    if (in[x].is_static()) out[x] = Dim(slice_axis(in[x].value(), a.starts[i], a.ends[i], a.steps[i]).len);
    else if (a.starts[i] == 0 && a.ends[i] >= INT64_MAX / 2 && a.steps[i] == 1) out[x] = in[x];
    else out[x] = c.fresh(static_cast<uint32_t>(x));
  }
  return std::vector<PortType>{{c.type(0), Shape(out)}};
}
Outs eval_Slice(const Node& n, std::span<const Tensor> in) {
  const auto& a = n.attrs<SliceAttrs>();
  const auto& s = in[0].shape();
  auto ax = slice_axes(a, s.size());
  if (!ax) return kernel_error(n, ax.error().what);
  std::vector<SliceAxis> per(s.size());
  for (size_t i = 0; i < s.size(); ++i) per[i] = {0, s[i], 1};
  for (size_t i = 0; i < ax->size(); ++i) per[(*ax)[i]] = slice_axis(s[(*ax)[i]], a.starts[i], a.ends[i], a.steps[i]);
  std::vector<int64_t> out(s.size()), ist = strides_of(s), map;
  for (size_t i = 0; i < s.size(); ++i) out[i] = per[i].len;
  for_each_index(out, [&](const std::vector<int64_t>& idx, int64_t) {
    int64_t k = 0;
    for (size_t i = 0; i < idx.size(); ++i) k += (per[i].start + idx[i] * per[i].step) * ist[i];
    map.push_back(k);
  });
  return std::vector<Tensor>{take_elements(in[0], out, map)};
}

// ---- VariadicSplit(axis, lengths): consecutive pieces; one length may be -1 (the rest).
Ports infer_VariadicSplit(InferCtx& c) {
  const auto& a = c.attrs<SplitAttrs>();
  const Shape& in = c.shape(0);
  if (a.lengths.empty()) return fail("split lengths are empty");
  int64_t known = 0, m1 = -1;
  for (size_t i = 0; i < a.lengths.size(); ++i) {
    if (a.lengths[i] == -1) {
      if (m1 >= 0) return fail("split lengths have more than one -1");
      m1 = static_cast<int64_t>(i);
    } else if (a.lengths[i] < 0) return fail("split length " + std::to_string(a.lengths[i]));
    else known += a.lengths[i];
  }
  std::vector<PortType> outs;
  if (!in.rank_known()) {
    for (size_t i = 0; i < a.lengths.size(); ++i) outs.push_back({c.type(0), in});
    return outs;
  }
  auto ax = normalize_axis(a.axis, static_cast<int64_t>(in.rank()), "split axis");
  if (!ax) return ax.error();
  const Dim& d = in[*ax];
  if (d.is_static() && (m1 < 0 ? known != d.value() : known > d.value()))
    return fail("split lengths " + join(a.lengths) + " do not add up to " + d.str() + " (axis " + std::to_string(*ax) + " of " + in.str() + ")");
  for (size_t i = 0; i < a.lengths.size(); ++i) {
    Shape s = in;
    if (static_cast<int64_t>(i) != m1) s[*ax] = Dim(a.lengths[i]);
    else s[*ax] = d.is_static() ? Dim(d.value() - known) : known == 0 ? d : c.fresh(static_cast<uint32_t>(i));
    outs.push_back({c.type(0), s});
  }
  return outs;
}
Outs eval_VariadicSplit(const Node& n, std::span<const Tensor> in) {
  const auto& a = n.attrs<SplitAttrs>();
  const auto& s = in[0].shape();
  int64_t axis = a.axis < 0 ? a.axis + static_cast<int64_t>(s.size()) : a.axis;
  int64_t known = 0;
  for (int64_t l : a.lengths) known += l == -1 ? 0 : l;
  std::vector<Tensor> outs;
  int64_t begin = 0;
  for (int64_t l : a.lengths) {
    int64_t len = l == -1 ? s[axis] - known : l;
    if (len < 0 || begin + len > s[axis]) return kernel_error(n, "split lengths do not fit " + shape_str(s));
    std::vector<int64_t> out = s;
    out[axis] = len;
    std::vector<int64_t> ist = strides_of(s), map;
    for_each_index(out, [&](const std::vector<int64_t>& idx, int64_t) {
      int64_t k = 0;
      for (size_t i = 0; i < idx.size(); ++i) k += (idx[i] + (static_cast<int64_t>(i) == axis ? begin : 0)) * ist[i];
      map.push_back(k);
    });
    outs.push_back(take_elements(in[0], out, map));
    begin += len;
  }
  if (begin != s[axis]) return kernel_error(n, "split lengths do not add up to " + std::to_string(s[axis]));
  return outs;
}

// ---- ScatterUpdate(data, indices, updates): data[..., indices[j], ...] = updates[..., j, ...]
Ports infer_ScatterUpdate(InferCtx& c) {
  const Shape &d = c.shape(0), &ix = c.shape(1), &u = c.shape(2);
  if (!is_integer(c.type(1))) return fail("indices must be integer");
  if (c.type(2) != c.type(0)) return fail("updates are " + std::string(to_string(c.type(2))) + ", data is " + std::string(to_string(c.type(0))));
  if (d.rank_known() && ix.rank_known() && u.rank_known()) {
    auto ax = normalize_axis(c.attrs<AxisAttrs>().axis, static_cast<int64_t>(d.rank()), "scatter axis");
    if (!ax) return ax.error();
    std::vector<Dim> want(d.dims().begin(), d.dims().begin() + *ax);
    want.insert(want.end(), ix.dims().begin(), ix.dims().end());
    want.insert(want.end(), d.dims().begin() + *ax + 1, d.dims().end());
    bool ok = want.size() == u.rank();
    for (size_t i = 0; ok && i < want.size(); ++i) ok = same_or_dynamic(want[i], u[i]);
    if (!ok) return fail("updates " + u.str() + " must have shape " + Shape(want).str());
  }
  return std::vector<PortType>{{c.type(0), d}};
}
Outs eval_ScatterUpdate(const Node& n, std::span<const Tensor> in) {
  const auto& ds = in[0].shape();
  int64_t axis = n.attrs<AxisAttrs>().axis < 0 ? n.attrs<AxisAttrs>().axis + static_cast<int64_t>(ds.size()) : n.attrs<AxisAttrs>().axis;
  int64_t P = product({ds.begin(), ds.begin() + axis}), N = ds[axis], S = product({ds.begin() + axis + 1, ds.end()});
  std::vector<int64_t> idx = in[1].to_i64();
  int64_t I = static_cast<int64_t>(idx.size());
  if (in[2].numel() != P * I * S) return kernel_error(n, "updates " + shape_str(in[2].shape()) + " do not match");
  Tensor y = in[0];  // written in place: output 0 aliases data (op_list.h)
  size_t es = scalar_size(in[0].type());
  for (int64_t i = 0; i < I; ++i) {
    int64_t k = idx[i] < 0 ? idx[i] + N : idx[i];
    if (k < 0 || k >= N) return kernel_error(n, "index " + std::to_string(idx[i]) + " out of range [0, " + std::to_string(N) + ")");
  }
  for (int64_t p = 0; p < P; ++p)
    for (int64_t i = 0; i < I; ++i) {
      int64_t k = idx[i] < 0 ? idx[i] + N : idx[i];
      std::memcpy(y.mutable_bytes() + ((p * N + k) * S) * es, in[2].bytes() + ((p * I + i) * S) * es, S * es);
    }
  return std::vector<Tensor>{y};
}

}  // namespace ggflow::ir
