#include "ir/kernel_util.h"

#include "ir/infer_ctx.h"

namespace ggflow::ir {

std::vector<int64_t> strides_of(const std::vector<int64_t>& shape) {
  std::vector<int64_t> st(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) st[i - 1] = st[i] * shape[i];
  return st;
}

Result<std::vector<int64_t>> broadcast_static(const std::vector<std::vector<int64_t>>& shapes) {
  size_t rank = 0;
  for (const auto& s : shapes) rank = std::max(rank, s.size());
  std::vector<int64_t> out(rank, 1);
  for (const auto& s : shapes) {
    for (size_t i = 0; i < s.size(); ++i) {
      int64_t& o = out[rank - s.size() + i];
      int64_t d = s[i];
      if (d == o || d == 1) continue;
      if (o == 1) { o = d; continue; }
      return fail("cannot broadcast " + shape_str(s) + " at axis " + std::to_string(rank - s.size() + i));
    }
  }
  return out;
}

std::vector<int64_t> broadcast_map(const std::vector<int64_t>& out, const std::vector<int64_t>& in) {
  int64_t n = product(out);
  std::vector<int64_t> map(static_cast<size_t>(n));
  size_t r = out.size(), off = r - in.size();
  std::vector<int64_t> ist = strides_of(in);
  std::vector<int64_t> idx(r, 0);
  for (int64_t e = 0; e < n; ++e) {
    int64_t k = 0;
    for (size_t a = off; a < r; ++a)
      if (in[a - off] != 1) k += idx[a] * ist[a - off];
    map[e] = k;
    for (size_t a = r; a-- > 0;) {
      if (++idx[a] < out[a]) break;
      idx[a] = 0;
    }
  }
  return map;
}

Result<std::vector<int64_t>> normalize_axes(const std::vector<int64_t>& axes, int64_t rank,
                                            const char* what) {
  std::vector<int64_t> out;
  for (int64_t a : axes) {
    auto r = normalize_axis(a, rank, what);
    if (!r) return r.error();
    for (int64_t b : out)
      if (b == *r) return fail(std::string(what) + " repeats axis " + std::to_string(a));
    out.push_back(*r);
  }
  return out;
}

std::string shape_str(const std::vector<int64_t>& s) { return join(s); }

}  // namespace ggflow::ir

namespace ggflow::ir {
Tensor take_elements(const Tensor& in, std::vector<int64_t> out_shape, const std::vector<int64_t>& map) {
  Tensor out(in.type(), std::move(out_shape));
  size_t es = scalar_size(in.type());
  uint8_t* o = out.mutable_bytes();
  for (size_t e = 0; e < map.size(); ++e) std::memcpy(o + e * es, in.bytes() + map[e] * es, es);
  return out;
}
SliceAxis slice_axis(int64_t d, int64_t s, int64_t e, int64_t step) {
  if (step > 0) {
    s = s < 0 ? std::max<int64_t>(0, s + d) : std::min(s, d);
    e = e < 0 ? std::max<int64_t>(0, e + d) : std::min(e, d);
    return {s, e > s ? (e - s + step - 1) / step : 0, step};
  }
  s = s < 0 ? std::max<int64_t>(-1, s + d) : std::min(s, d - 1);
  e = e < 0 ? std::max<int64_t>(-1, e + d) : std::min(e, d - 1);
  return {s, s > e ? (s - e - step - 1) / -step : 0, step};
}
Result<std::vector<int64_t>> slice_axes(const SliceAttrs& a, size_t rank) {
  size_t n = a.starts.size();
  if (a.ends.size() != n || a.steps.size() != n || (!a.axes.empty() && a.axes.size() != n))
    return make_error("starts, ends, steps and axes must have the same length");
  for (int64_t st : a.steps)
    if (st == 0) return make_error("slice step is 0");
  std::vector<int64_t> ax = a.axes;
  if (ax.empty())
    for (size_t i = 0; i < n; ++i) ax.push_back(static_cast<int64_t>(i));
  return normalize_axes(ax, static_cast<int64_t>(rank), "slice axis");
}

}  // namespace ggflow::ir
