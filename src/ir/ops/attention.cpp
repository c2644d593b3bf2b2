// ScaledDotProductAttention(q [..., Hq, Tq, S], k [..., Hkv, Tk, S], v [..., Hkv, Tk, Sv],
// mask?) -> [..., Hq, Tq, Sv]. GQA: query head h reads kv head h / (Hq / Hkv). The mask is
// additive (f32, broadcast to [..., Hq, Tq, Tk]) or boolean (true = attend). causal: query i sees
// keys j <= i + (Tk - Tq) (queries are the last Tq positions). scale 0 means 1/sqrt(S).
// logit_softcap c != 0 (Gemma 2): each score is c * tanh(dot * (scale / c)) before the mask is
// added (ggml's FLASH_ATTN_EXT order). Per query row (attention_row.h): scores in f32, max, exp,
// sum in key order, weighted sum of v in key order; a row that sees no key is 0. q8_0_scores: the
// scores in q8_0 arithmetic (attention_score_q8).
#include <cmath>
#include <limits>

#include "ir/attention_row.h"
#include "ir/infer_ctx.h"
#include "ir/kernel_util.h"
#include "ir/op_registry.h"

namespace ggflow::ir {

using Ports = Result<std::vector<PortType>>;
using Outs = Result<std::vector<Tensor>>;

Ports infer_ScaledDotProductAttention(InferCtx& c) {
  if (!std::isfinite(c.attrs<SdpaAttrs>().logit_softcap))
    return fail("logit_softcap must be finite, got " + std::to_string(c.attrs<SdpaAttrs>().logit_softcap),
                "0 turns soft-capping off; Gemma 2 uses attn_logit_softcapping = 50");
  for (size_t i = 0; i < 3; ++i)
    if (!is_float(c.type(i))) return fail("input " + std::to_string(i) + " must be a float type");
  const Shape &q = c.shape(0), &k = c.shape(1), &v = c.shape(2);
  if (!q.rank_known() || !k.rank_known() || !v.rank_known()) return std::vector<PortType>{{c.type(0), Shape::dynamic_rank()}};
  size_t r = q.rank();
  if (r < 3 || k.rank() != r || v.rank() != r)
    return fail("q, k, v must have the same rank >= 3: " + q.str() + ", " + k.str() + ", " + v.str());
  for (size_t i = 0; i + 3 < r; ++i)
    if (!same_or_dynamic(q[i], k[i]) || !same_or_dynamic(q[i], v[i])) return fail("batch dims differ: " + q.str() + ", " + k.str() + ", " + v.str());
  const Dim &hq = q[r - 3], &hk = k[r - 3];
  if (!same_or_dynamic(hk, v[r - 3])) return fail("k and v head counts differ: " + k.str() + ", " + v.str());
  if (hq.is_static() && hk.is_static() && (hk.value() == 0 || hq.value() % hk.value() != 0))
    return fail("query heads " + hq.str() + " are not a multiple of kv heads " + hk.str());
  if (!same_or_dynamic(q[r - 1], k[r - 1])) return fail("q and k head sizes differ: " + q.str() + ", " + k.str());
  if (!same_or_dynamic(k[r - 2], v[r - 2])) return fail("k and v lengths differ: " + k.str() + ", " + v.str());
  if (c.n_in() == 4) {
    if (!is_float(c.type(3)) && c.type(3) != ElementType::boolean) return fail("mask must be float or boolean");
    std::vector<Dim> sc(q.dims().begin(), q.dims().end() - 1);
    sc.push_back(k[r - 2]);
    const Shape& m = c.shape(3);
    if (m.rank_known()) {
      bool ok = m.rank() <= r;
      for (size_t i = 0; ok && i < m.rank(); ++i) ok = m[i].is(1) || same_or_dynamic(m[i], sc[r - m.rank() + i]);
      if (!ok) return fail("mask " + m.str() + " does not broadcast to the scores " + Shape(sc).str());
    }
  }
  Shape out = q;
  out[r - 1] = v[r - 1];
  return std::vector<PortType>{{c.type(0), out}};
}

Outs eval_ScaledDotProductAttention(const Node& n, std::span<const Tensor> in) {
  const auto& a = n.attrs<SdpaAttrs>();
  const auto &qs = in[0].shape(), &ks = in[1].shape(), &vs = in[2].shape();
  size_t r = qs.size();
  int64_t Hq = qs[r - 3], Tq = qs[r - 2], S = qs[r - 1], Hk = ks[r - 3], Tk = ks[r - 2], Sv = vs[r - 1];
  if (Hk == 0 || Hq % Hk != 0) return kernel_error(n, "query heads are not a multiple of kv heads");
  int64_t B = product({qs.begin(), qs.end() - 3}), group = Hq / Hk;
  if (product({ks.begin(), ks.end() - 3}) != B || product({vs.begin(), vs.end() - 3}) != B || vs[r - 2] != Tk)
    return kernel_error(n, "q, k, v batch dims or k/v lengths differ: " + shape_str(qs) + ", " + shape_str(ks) + ", " + shape_str(vs));
  float scale = a.scale != 0.0f ? a.scale : 1.0f / std::sqrt(static_cast<float>(S));
  std::vector<float> q = in[0].to_f32(), k = in[1].to_f32(), v = in[2].to_f32(), mask;
  std::vector<int64_t> mmap;
  bool bool_mask = false;
  if (in.size() == 4) {
    std::vector<int64_t> sc(qs.begin(), qs.end() - 1);
    sc.push_back(Tk);
    if (in[3].rank() > sc.size()) return kernel_error(n, "mask rank too large");
    mmap = broadcast_map(sc, in[3].shape());
    mask = in[3].to_f32();
    bool_mask = in[3].type() == ElementType::boolean;
  }
  const float ninf = -std::numeric_limits<float>::infinity();
  if (a.q8_0_scores && S % gguf::kQ8_0Block != 0)
    return kernel_error(n, "q8_0 scores need a head size that is a multiple of 32, got " + std::to_string(S));
  std::vector<float> out(static_cast<size_t>(B * Hq * Tq * Sv)), sc(Tk);
  std::vector<Q8Row> k8;  // a q8_0 head's key rows, once per kv head
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hq; ++h) {
      int64_t hk = h / group;
      const float* K = k.data() + (b * Hk + hk) * Tk * S;
      const float* V = v.data() + (b * Hk + hk) * Tk * Sv;
      if (a.q8_0_scores && h % group == 0) {
        k8.clear();
        for (int64_t j = 0; j < Tk; ++j) k8.push_back(q8_row(K + j * S, S));
      }
      for (int64_t i = 0; i < Tq; ++i) {
        const float* Q = q.data() + ((b * Hq + h) * Tq + i) * S;
        const Q8Row q8 = a.q8_0_scores ? q8_row(Q, S) : Q8Row{};
        sc.assign(static_cast<size_t>(Tk), 0.0f);
        for (int64_t j = 0; j < Tk; ++j) {
          float s = a.q8_0_scores ? attention_score_q8(q8, k8[j], scale, a.logit_softcap)
                                  : attention_score(Q, K + j * S, S, scale, a.logit_softcap);  // capped, then the mask
          if (!mmap.empty()) {
            float m = mask[mmap[((b * Hq + h) * Tq + i) * Tk + j]];
            s = bool_mask ? (m != 0.0f ? s : ninf) : s + m;
          }
          if (a.causal && j > i + (Tk - Tq)) s = ninf;
          sc[j] = s;
        }
        attend_row(sc, [&](int64_t j) { return V + j * Sv; }, Sv, out.data() + ((b * Hq + h) * Tq + i) * Sv);
      }
    }
  std::vector<int64_t> os = qs;
  os[r - 1] = Sv;
  return std::vector<Tensor>{Tensor::from_f32(in[0].type(), os, out)};
}

}  // namespace ggflow::ir
