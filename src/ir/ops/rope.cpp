// RoPE(x [..., T, H, S], positions (broadcast to [..., T]), freq_factors [n_dims/2]?) -> x's shape.
// GGML's formula and order: theta_i = p * base^(-2i/n_dims) computed by repeated multiplication,
// divided by freq_factors[i], scaled by freq_scale; cos and sin are multiplied by attn_factor.
// normal: rotates pairs (2i, 2i+1); neox: pairs (i, i + n_dims/2). Dims >= n_dims pass through.
#include <cmath>

#include "ir/infer_ctx.h"
#include "ir/kernel_util.h"
#include "ir/op_registry.h"

namespace ggflow::ir {

using Ports = Result<std::vector<PortType>>;
using Outs = Result<std::vector<Tensor>>;

Ports infer_RoPE(InferCtx& c) {
  const auto& a = c.attrs<RopeAttrs>();
  if (!is_float(c.type(0))) return fail("x must be a float type");
  if (!is_integer(c.type(1))) return fail("positions must be integer, not " + std::string(to_string(c.type(1))));
  const Shape &x = c.shape(0), &p = c.shape(1);
  if (!x.rank_known()) return std::vector<PortType>{{c.type(0), x}};
  if (x.rank() < 3) return fail("x must be [..., T, H, S], got " + x.str());
  const Dim& s = x[x.rank() - 1];
  if (a.n_dims < 0 || a.n_dims % 2 != 0) return fail("n_dims must be even and >= 0, got " + std::to_string(a.n_dims));
  if (s.is_static() && a.n_dims > s.value()) return fail("n_dims " + std::to_string(a.n_dims) + " exceeds head size " + s.str());
  if (p.rank_known()) {
    size_t rb = x.rank() - 2;
    bool ok = p.rank() <= rb;
    for (size_t i = 0; ok && i < p.rank(); ++i) {
      const Dim& pd = p[i];
      const Dim& xd = x[rb - p.rank() + i];
      ok = pd.is(1) || same_or_dynamic(pd, xd);
    }
    if (!ok) return fail("positions " + p.str() + " do not broadcast to the token dims of x " + x.str(),
                         "positions follow the token axis of x (axis -3)");
  }
  if (c.n_in() == 3 && c.type(2) != ElementType::f32) return fail("freq_factors must be f32");
  return std::vector<PortType>{{c.type(0), x}};
}

Outs eval_RoPE(const Node& n, std::span<const Tensor> in) {
  const auto& a = n.attrs<RopeAttrs>();
  const auto& xs = in[0].shape();
  size_t r = xs.size();
  int64_t H = xs[r - 2], S = xs[r - 1];
  int64_t nd = a.n_dims == 0 ? S : a.n_dims;
  std::vector<int64_t> bs(xs.begin(), xs.end() - 2);
  if (in[1].rank() > bs.size()) return kernel_error(n, "positions have too many dims");
  auto pmap = broadcast_map(bs, in[1].shape());
  std::vector<int64_t> pos = in[1].to_i64();
  std::vector<float> ff;
  if (in.size() == 3) {
    ff = in[2].to_f32();
    if (static_cast<int64_t>(ff.size()) < nd / 2) return kernel_error(n, "freq_factors has " + std::to_string(ff.size()) + " values, needs " + std::to_string(nd / 2));
  }
  std::vector<float> x = in[0].to_f32(), cs(nd), sn(nd);
  const float theta_scale = std::pow(a.freq_base, -2.0f / static_cast<float>(nd));
  for (size_t row = 0; row < pmap.size(); ++row) {
    float theta = static_cast<float>(pos[pmap[row]]);
    for (int64_t i0 = 0; i0 < nd; i0 += 2) {
      float f = ff.empty() ? 1.0f : ff[i0 / 2];
      float th = a.freq_scale * (theta / f);
      cs[i0] = std::cos(th) * a.attn_factor;
      sn[i0] = std::sin(th) * a.attn_factor;
      theta *= theta_scale;
    }
    for (int64_t h = 0; h < H; ++h) {
      float* v = x.data() + (static_cast<int64_t>(row) * H + h) * S;
      for (int64_t i0 = 0; i0 < nd; i0 += 2) {
        int64_t j0 = a.mode == RopeMode::normal ? i0 : i0 / 2;
        int64_t j1 = a.mode == RopeMode::normal ? i0 + 1 : i0 / 2 + nd / 2;
        float x0 = v[j0], x1 = v[j1];
        v[j0] = x0 * cs[i0] - x1 * sn[i0];
        v[j1] = x0 * sn[i0] + x1 * cs[i0];
      }
    }
  }
  return std::vector<Tensor>{Tensor::from_f32(in[0].type(), xs, x)};
}

}  // namespace ggflow::ir
