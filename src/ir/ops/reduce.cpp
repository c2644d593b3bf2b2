// Reductions and normalizations: ReduceSum/Mean/Prod, Softmax, RMSNorm, LayerNorm. Accumulation is f32
// (i64 for integers) in row-major order of the input: fixed, independent of other rows.
#include <cmath>
#include <limits>

#include "ir/infer_ctx.h"
#include "ir/kernel_util.h"
#include "ir/op_registry.h"

namespace ggflow::ir {

using Ports = Result<std::vector<PortType>>;
using Outs = Result<std::vector<Tensor>>;

namespace {
enum class Red { sum, mean, prod };

Result<std::vector<bool>> reduced(const ReduceAttrs& a, size_t rank) {
  std::vector<bool> r(rank, a.axes.empty());
  auto ax = normalize_axes(a.axes, static_cast<int64_t>(rank), "reduce axis");
  if (!ax) return ax.error();
  for (int64_t x : *ax) r[x] = true;
  return r;
}

Ports infer_reduce(InferCtx& c) {
  ElementType t = c.type(0);
  if (is_block(t) || t == ElementType::boolean) return fail("cannot reduce " + std::string(to_string(t)));
  const Shape& in = c.shape(0);
  const auto& a = c.attrs<ReduceAttrs>();
  if (!in.rank_known()) return std::vector<PortType>{{t, in}};
  auto r = reduced(a, in.rank());
  if (!r) return r.error();
  std::vector<Dim> out;
  for (size_t i = 0; i < in.rank(); ++i) {
    if (!(*r)[i]) out.push_back(in[i]);
    else if (a.keep_dims) out.push_back(Dim(1));
  }
  return std::vector<PortType>{{t, Shape(out)}};
}

Outs eval_reduce(const Node& n, std::span<const Tensor> in, Red op) {
  const auto& a = n.attrs<ReduceAttrs>();
  const auto& s = in[0].shape();
  auto r = reduced(a, s.size());
  if (!r) return kernel_error(n, r.error().what);
  std::vector<int64_t> out_keep, out;
  for (size_t i = 0; i < s.size(); ++i) {
    out_keep.push_back((*r)[i] ? 1 : s[i]);
    if (!(*r)[i]) out.push_back(s[i]);
    else if (a.keep_dims) out.push_back(1);
  }
  std::vector<int64_t> ost = strides_of(out_keep);
  int64_t m = product(out_keep), count = m ? product(s) / m : 0;
  ElementType t = in[0].type();
  std::vector<int64_t> dst(product(s));
  for_each_index(s, [&](const std::vector<int64_t>& idx, int64_t e) {
    int64_t k = 0;
    for (size_t i = 0; i < idx.size(); ++i) k += ((*r)[i] ? 0 : idx[i]) * ost[i];
    dst[e] = k;
  });
  if (is_float(t)) {
    std::vector<float> acc(m, op == Red::prod ? 1.0f : 0.0f), x = in[0].to_f32();
    for (size_t e = 0; e < x.size(); ++e) acc[dst[e]] = op == Red::prod ? acc[dst[e]] * x[e] : acc[dst[e]] + x[e];
    if (op == Red::mean)
      for (float& v : acc) v /= static_cast<float>(count);
    return std::vector<Tensor>{Tensor::from_f32(t, out, acc)};
  }
  std::vector<int64_t> acc(m, op == Red::prod ? 1 : 0), x = in[0].to_i64();
  for (size_t e = 0; e < x.size(); ++e) acc[dst[e]] = op == Red::prod ? acc[dst[e]] * x[e] : acc[dst[e]] + x[e];
  if (op == Red::mean)
    for (int64_t& v : acc) v = count ? v / count : 0;
  return std::vector<Tensor>{Tensor::from_i64(t, out, acc)};
}
}  // namespace

Ports infer_ReduceSum(InferCtx& c) { return infer_reduce(c); }
Ports infer_ReduceMean(InferCtx& c) { return infer_reduce(c); }
Ports infer_ReduceProd(InferCtx& c) { return infer_reduce(c); }
Outs eval_ReduceSum(const Node& n, std::span<const Tensor> in) { return eval_reduce(n, in, Red::sum); }
Outs eval_ReduceMean(const Node& n, std::span<const Tensor> in) { return eval_reduce(n, in, Red::mean); }
Outs eval_ReduceProd(const Node& n, std::span<const Tensor> in) { return eval_reduce(n, in, Red::prod); }

// ---- Softmax(axis): exp(x - max) / sum, sum in order along the axis.
Ports infer_Softmax(InferCtx& c) {
  if (!is_float(c.type(0))) return fail("input must be a float type");
  if (c.shape(0).rank_known())
    if (auto ax = normalize_axis(c.attrs<AxisAttrs>().axis, static_cast<int64_t>(c.shape(0).rank()), "softmax axis"); !ax)
      return ax.error();
  return std::vector<PortType>{{c.type(0), c.shape(0)}};
}
Outs eval_Softmax(const Node& n, std::span<const Tensor> in) {
  const auto& s = in[0].shape();
  int64_t ax = n.attrs<AxisAttrs>().axis < 0 ? n.attrs<AxisAttrs>().axis + static_cast<int64_t>(s.size()) : n.attrs<AxisAttrs>().axis;
  int64_t outer = product({s.begin(), s.begin() + ax}), len = s[ax], inner = product({s.begin() + ax + 1, s.end()});
  std::vector<float> x = in[0].to_f32();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      float* base = x.data() + o * len * inner + i;
      float mx = -std::numeric_limits<float>::infinity();
      for (int64_t k = 0; k < len; ++k) mx = std::max(mx, base[k * inner]);
      float sum = 0.0f;
      for (int64_t k = 0; k < len; ++k) {
        float e = mx == -std::numeric_limits<float>::infinity() ? 0.0f : std::exp(base[k * inner] - mx);
        base[k * inner] = e;
        sum += e;
      }
      for (int64_t k = 0; k < len; ++k) base[k * inner] = sum > 0.0f ? base[k * inner] / sum : 0.0f;
    }
  return std::vector<Tensor>{Tensor::from_f32(in[0].type(), s, x)};
}

// ---- RMSNorm(x [..., H], gamma [H]?): y = x * (1 / sqrt(mean(x^2) + eps)) * gamma
Ports infer_RMSNorm(InferCtx& c) {
  if (!is_float(c.type(0))) return fail("input must be a float type");
  const Shape& x = c.shape(0);
  if (x.rank_known() && x.rank() == 0) return fail("input must have rank >= 1");
  if (c.n_in() == 2) {
    if (!is_float(c.type(1))) return fail("gamma must be a float type");
    const Shape& g = c.shape(1);
    if (g.rank_known() && (g.rank() != 1 || (x.rank_known() && !same_or_dynamic(g[0], x[x.rank() - 1]))))
      return fail("gamma " + g.str() + " must be [H] for input " + x.str());
  }
  return std::vector<PortType>{{c.type(0), x}};
}
Outs eval_RMSNorm(const Node& n, std::span<const Tensor> in) {
  const auto& s = in[0].shape();
  int64_t h = s.back(), rows = h ? in[0].numel() / h : 0;
  float eps = n.attrs<RMSNormAttrs>().eps;
  std::vector<float> x = in[0].to_f32(), g;
  if (in.size() == 2) {
    g = in[1].to_f32();
    if (static_cast<int64_t>(g.size()) != h) return kernel_error(n, "gamma has " + std::to_string(g.size()) + " values, H is " + std::to_string(h));
  }
  for (int64_t r = 0; r < rows; ++r) {
    float* row = x.data() + r * h;
    float sum = 0.0f;
    for (int64_t k = 0; k < h; ++k) sum += row[k] * row[k];
    const float scale = 1.0f / std::sqrt(sum / static_cast<float>(h) + eps);
    for (int64_t k = 0; k < h; ++k) row[k] = g.empty() ? row[k] * scale : (row[k] * scale) * g[k];
  }
  return std::vector<Tensor>{Tensor::from_f32(in[0].type(), s, x)};
}

// ---- LayerNorm(x [..., H]): y = (x - mean) * (1 / sqrt(mean((x - mean)^2) + eps)), both means
// sequential f32 sums divided by H (what GGML's NORM computes, and the reference for the CPU's).
Ports infer_LayerNorm(InferCtx& c) {
  if (!is_float(c.type(0))) return fail("input must be a float type");
  const Shape& x = c.shape(0);
  if (x.rank_known() && x.rank() == 0) return fail("input must have rank >= 1");
  return std::vector<PortType>{{c.type(0), x}};
}
Outs eval_LayerNorm(const Node& n, std::span<const Tensor> in) {
  const auto& s = in[0].shape();
  int64_t h = s.back(), rows = h ? in[0].numel() / h : 0;
  float eps = n.attrs<LayerNormAttrs>().eps;
  std::vector<float> x = in[0].to_f32();
  for (int64_t r = 0; r < rows; ++r) {
    float* row = x.data() + r * h;
    float sum = 0.0f;
    for (int64_t k = 0; k < h; ++k) sum += row[k];
    const float mean = sum / static_cast<float>(h);
    float sq = 0.0f;
    for (int64_t k = 0; k < h; ++k) sq += (row[k] - mean) * (row[k] - mean);
    const float inv = 1.0f / std::sqrt(sq / static_cast<float>(h) + eps);
    for (int64_t k = 0; k < h; ++k) row[k] = (row[k] - mean) * inv;
  }
  return std::vector<Tensor>{Tensor::from_f32(in[0].type(), s, x)};
}

}  // namespace ggflow::ir
