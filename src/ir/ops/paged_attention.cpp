// PagedAttention (DESIGN.md section 4): attention of a mixed batch of sequences whose past keys and
// values live in fixed-size blocks of a shared cache, addressed by per-sequence block tables.
//
// Inputs, in order:
//   0 q                 [T, Hq·S]          every active token of every sequence is one row
//   1 k                 [T, Hkv·S]         this step's new keys
//   2 v                 [T, Hkv·Sv]        this step's new values
//   3 key_cache         [NB, Hkv, BS, S]   NB blocks of BS (= 32 on CPU) rows; f32, f16 or q8_0
//   4 value_cache       [NB, Hkv, BS, Sv]
//   5 past_lens         i32 [B]            rows sequence s already has in cache
//   6 subsequence_begins i32 [B+1]         prefix sums of the new tokens per sequence, from 0
//   7 block_indices     i32 [Σ]            the block tables, concatenated
//   8 block_indices_begins i32 [B+1]       where each sequence's table starts in block_indices
//   9 max_context_len   i32 []             max over s of past_lens[s] + new tokens (checked)
//  10 scale             f32 []             0 = 1/sqrt(S)
//  11 sliding_window    i32 []             0 = off; else a query at position p sees keys > p - window
//  12 alibi_slopes      f32 [Hq] or [0]    score += slope[h] · (key position - query position)
//  13 logit_softcap     f32 [] (optional)  0 or absent = off; else c: score = c · tanh(dot · (scale / c))
//                                          before the alibi bias (Gemma 2; a ggflow extension after
//                                          OpenVINO's 13 inputs, so graphs without it keep 13)
// Outputs: 0 attention [T, Hq·Sv]; 1, 2 the key and value caches with this step's rows written.
//
// The caches are modelled as in/out values, not as hidden state: outputs 1 and 2 alias inputs 3
// and 4 (op_list.h, GGFLOW_IR_ALIASES). The kernel writes this step's rows into the cache buffers
// it is handed and returns them; the evaluator hands over the runtime's caches themselves (so a
// step costs its tokens, not the pool) and a private copy of anything it cannot prove exclusive
// (so a plain evaluate() stays free of side effects and "what the kernel wrote" is checkable).
//
// Token t of sequence s sits at position p = past_lens[s] + (t - subsequence_begins[s]); it is
// first written to block block_indices[block_indices_begins[s] + p / BS], slot p % BS, for every
// new token of the step; then each (t, head h) attends to the keys at positions 0..p of its
// sequence (minus those outside the sliding window), kv head h / (Hq / Hkv). The per-row
// arithmetic is exactly ScaledDotProductAttention's (ops/attention.cpp): dot product over d in
// order, times scale (or soft-capped: c · tanh(dot · (scale / c))); over a q8_0 cache the dot in
// q8_0 arithmetic (attention_score_q8, as SDPA with q8_0_scores); plus the additive mask value 0, max / exp / sum over keys in position order,
// f32 accumulation of weight · v in position order, one division. Keys that SDPA masks with -inf
// contribute exactly 0 there, so skipping them here gives the same bits.
#include <algorithm>
#include <cmath>
#include <limits>

#include "gguf/dequant.h"
#include "gguf/quantize.h"
#include "ir/attention_row.h"
#include "ir/infer_ctx.h"
#include "ir/kernel_util.h"
#include "ir/op_registry.h"

namespace ggflow::ir {

using Ports = Result<std::vector<PortType>>;
using Outs = Result<std::vector<Tensor>>;

namespace {
bool is_int(ElementType t) { return t == ElementType::i32 || t == ElementType::i64; }
}  // namespace

Ports infer_PagedAttention(InferCtx& c) {
  static const char* names[] = {"q", "k", "v", "key_cache", "value_cache", "past_lens", "subsequence_begins",
                                "block_indices", "block_indices_begins", "max_context_len", "scale",
                                "sliding_window", "alibi_slopes", "logit_softcap"};
  static const size_t ranks[] = {2, 2, 2, 4, 4, 1, 1, 1, 1, 0, 0, 0, 1, 0};
  for (size_t i = 0; i < c.n_in(); ++i) {
    bool want_float = i <= 4 || i == 10 || i >= 12;
    const bool q8_cache = (i == 3 || i == 4) && c.type(i) == ElementType::q8_0;  // a q8_0 cache: rows of 32s
    if (q8_cache && c.shape(i).rank_known() && c.shape(i).rank() == 4 && c.shape(i)[3].is_static() &&
        c.shape(i)[3].value() % 32 != 0)
      return fail(std::string(names[i]) + " is q8_0 with rows of " + c.shape(i)[3].str() + " values, not a multiple of 32",
                  "use an f16 or f32 KV cache for this head size");
    if (want_float ? !(is_float(c.type(i)) || q8_cache) : !is_int(c.type(i)))
      return fail(std::string(names[i]) + " must be " + (want_float ? "a float" : "an integer") + " type, not " +
                  std::string(to_string(c.type(i))));
    if (c.shape(i).rank_known() && c.shape(i).rank() != ranks[i])
      return fail(std::string(names[i]) + " must have rank " + std::to_string(ranks[i]) + ", got " + c.shape(i).str(),
                  "see DESIGN.md section 4 for the PagedAttention inputs");
  }
  const Shape &q = c.shape(0), &k = c.shape(1), &v = c.shape(2), &kc = c.shape(3), &vc = c.shape(4);
  if (!q.rank_known() || !kc.rank_known() || !vc.rank_known())
    return std::vector<PortType>{{c.type(0), Shape::dynamic_rank()}, {c.type(3), kc}, {c.type(4), vc}};
  for (const Shape* s : {&k, &v})
    if (s->rank_known() && !same_or_dynamic((*s)[0], q[0]))
      return fail("q, k, v have different token counts: " + q.str() + ", " + k.str() + ", " + v.str());
  if (!same_or_dynamic(kc[0], vc[0]) || !same_or_dynamic(kc[1], vc[1]) || !same_or_dynamic(kc[2], vc[2]))
    return fail("key and value caches differ in blocks, heads or block size: " + kc.str() + ", " + vc.str());
  if (!q[1].is_static())
    return fail("q " + q.str() + " must be [T, heads x head_size] with a static width",
                "the tokens must be on axis 0 (check the embedding's Unsqueeze axis and the q reshape)");
  Dim width = c.fresh(0);
  if (q[1].is_static() && kc[3].is_static() && vc[3].is_static() && kc[1].is_static()) {
    int64_t S = kc[3].value(), Hkv = kc[1].value();
    if (S == 0 || q[1].value() % S != 0)
      return fail("q width " + q[1].str() + " is not a multiple of the head size " + kc[3].str());
    int64_t Hq = q[1].value() / S;
    if (Hkv == 0 || Hq % Hkv != 0) return fail("query heads " + std::to_string(Hq) + " are not a multiple of kv heads " + std::to_string(Hkv));
    if (k.rank_known() && k[1].is_static() && k[1].value() != Hkv * S)
      return fail("k width " + k[1].str() + " is not kv_heads x head_size = " + std::to_string(Hkv * S));
    if (v.rank_known() && v[1].is_static() && v[1].value() != Hkv * vc[3].value())
      return fail("v width " + v[1].str() + " is not kv_heads x head_size = " + std::to_string(Hkv * vc[3].value()));
    width = Dim(Hq * vc[3].value());
  }
  return std::vector<PortType>{{c.type(0), Shape{q[0], width}}, {c.type(3), kc}, {c.type(4), vc}};
}

Outs eval_PagedAttention(const Node& n, std::span<const Tensor> in) {
  const auto &qs = in[0].shape(), &kcs = in[3].shape(), &vcs = in[4].shape();
  const int64_t T = qs[0], NB = kcs[0], Hk = kcs[1], BS = kcs[2], S = kcs[3], Sv = vcs[3];
  if (S == 0 || qs[1] % S != 0 || Hk == 0 || (qs[1] / S) % Hk != 0)
    return kernel_error(n, "q " + shape_str(qs) + " does not fit the cache " + shape_str(kcs));
  const int64_t Hq = qs[1] / S, group = Hq / Hk;
  if (in[1].shape() != std::vector<int64_t>{T, Hk * S} || in[2].shape() != std::vector<int64_t>{T, Hk * Sv})
    return kernel_error(n, "k " + shape_str(in[1].shape()) + " or v " + shape_str(in[2].shape()) + " do not fit q and the caches");
  std::vector<int64_t> past = in[5].to_i64(), sb = in[6].to_i64(), bi = in[7].to_i64(), bib = in[8].to_i64();
  const int64_t B = static_cast<int64_t>(past.size());
  if (static_cast<int64_t>(sb.size()) != B + 1 || static_cast<int64_t>(bib.size()) != B + 1 || sb[0] != 0 || sb[B] != T)
    return kernel_error(n, "subsequence_begins / block_indices_begins must have B+1 = " + std::to_string(B + 1) +
                               " entries, from 0 to T = " + std::to_string(T),
                        "they are prefix sums of the new tokens and of the block tables");
  const int64_t max_ctx = in[9].to_i64()[0], window = in[11].to_i64()[0];
  float scale = in[10].to_f32()[0];
  if (scale == 0.0f) scale = 1.0f / std::sqrt(static_cast<float>(S));
  std::vector<float> alibi = in[12].to_f32();
  if (!alibi.empty() && static_cast<int64_t>(alibi.size()) != Hq)
    return kernel_error(n, "alibi_slopes has " + std::to_string(alibi.size()) + " values, expected 0 or " + std::to_string(Hq));
  const float softcap = in.size() > 13 ? in[13].to_f32()[0] : 0.0f;  // 0 = off
  if (!std::isfinite(softcap))
    return kernel_error(n, "logit_softcap must be finite, got " + std::to_string(softcap), "0 turns soft-capping off");

  // f32, f16 or q8_0 caches (an f16 cache holds each value rounded to nearest even, a q8_0 one each
  // row as GGML q8_0 blocks, gguf/quantize.h; both read back exactly)
  const ElementType ct = in[3].type();
  if ((ct != ElementType::f32 && ct != ElementType::f16 && ct != ElementType::q8_0) || in[4].type() != ct)
    return kernel_error(n, "the caches must both be f32, both f16 or both q8_0, got " + std::string(to_string(ct)) + " and " +
                               std::string(to_string(in[4].type())),
                        "allocate key_cache / value_cache with the type of the model's cache parameters");
  if (ct == ElementType::q8_0 && (S % 32 != 0 || Sv % 32 != 0))
    return kernel_error(n, "q8_0 caches need head sizes that are multiples of 32, got " + std::to_string(S) + " / " + std::to_string(Sv));
  const bool half = ct == ElementType::f16, q8 = ct == ElementType::q8_0;
  std::vector<float> q = in[0].to_f32(), k = in[1].to_f32(), v = in[2].to_f32();
  Tensor kc_out = in[3], vc_out = in[4];  // written in place (aliased outputs 1 and 2)
  // cache row r (of W values) as f32: in place, or converted into buf
  auto row = [&](Tensor& t, int64_t r, int64_t W, std::vector<float>& buf) -> const float* {
    if (!half && !q8) return t.data<float>() + r * W;
    buf.resize(static_cast<size_t>(W));
    if (q8) {
      const size_t bytes = static_cast<size_t>(W / gguf::kQ8_0Block * gguf::kQ8_0Bytes);
      (void)gguf::dequantize(gguf::GgmlType::Q8_0, {t.bytes() + r * bytes, bytes}, static_cast<uint64_t>(W), buf.data());
    } else {
      for (int64_t d = 0; d < W; ++d) buf[d] = gguf::f16_to_f32(t.data<uint16_t>()[r * W + d]);
    }
    return buf.data();
  };
  // x[0..W) into cache row r
  auto put = [&](Tensor& t, int64_t r, int64_t W, const float* x) {
    if (q8) gguf::quantize_q8_0(x, W, t.mutable_bytes() + r * (W / gguf::kQ8_0Block * gguf::kQ8_0Bytes));
    else if (half)
      for (int64_t d = 0; d < W; ++d) t.data<uint16_t>()[r * W + d] = gguf::f32_to_f16(x[d]);
    else std::copy(x, x + W, t.data<float>() + r * W);
  };
  // Row of kv head h at position p of sequence s in a cache of row width W, or -1.
  std::vector<int64_t> seq_of(T), pos_of(T);
  for (int64_t s = 0; s < B; ++s) {
    if (sb[s + 1] < sb[s] || bib[s + 1] < bib[s] || bib[s + 1] > static_cast<int64_t>(bi.size()))
      return kernel_error(n, "sequence " + std::to_string(s) + ": begins are not increasing prefix sums");
    int64_t len = past[s] + sb[s + 1] - sb[s];
    if (len > (bib[s + 1] - bib[s]) * BS)
      return kernel_error(n, "sequence " + std::to_string(s) + " needs " + std::to_string(len) + " rows but its block table has " +
                                 std::to_string(bib[s + 1] - bib[s]) + " blocks of " + std::to_string(BS),
                          "allocate ceil((past + new) / block_size) blocks per sequence");
    if (len > max_ctx)
      return kernel_error(n, "sequence " + std::to_string(s) + " has " + std::to_string(len) +
                                 " rows, more than max_context_len " + std::to_string(max_ctx));
    for (int64_t t = sb[s]; t < sb[s + 1]; ++t) seq_of[t] = s, pos_of[t] = past[s] + t - sb[s];
  }
  auto block_row = [&](int64_t s, int64_t p, int64_t h) -> Result<int64_t> {  // (block, h, slot) row
    int64_t b = bi[bib[s] + p / BS];
    if (b < 0 || b >= NB) return kernel_error(n, "block index " + std::to_string(b) + " out of range [0, " + std::to_string(NB) + ")");
    return (b * Hk + h) * BS + p % BS;
  };
  // 1. write this step's rows into the caches
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < Hk; ++h) {
      auto r = block_row(seq_of[t], pos_of[t], h);
      if (!r) return r.error();
      put(kc_out, *r, S, k.data() + (t * Hk + h) * S);
      put(vc_out, *r, Sv, v.data() + (t * Hk + h) * Sv);
    }
  // 2. attend, per (row, head), with the row arithmetic ScaledDotProductAttention uses (attention_row.h)
  std::vector<float> out(static_cast<size_t>(T * Hq * Sv)), sc, kbuf, vbuf;
  std::vector<int64_t> krow;
  for (int64_t t = 0; t < T; ++t) {
    const int64_t s = seq_of[t], p = pos_of[t];
    const int64_t lo = window > 0 ? std::max<int64_t>(0, p - window + 1) : 0;
    for (int64_t h = 0; h < Hq; ++h) {
      const int64_t hk = h / group;
      krow.clear();
      for (int64_t j = lo; j <= p; ++j) {
        auto r = block_row(s, j, hk);
        if (!r) return r.error();
        krow.push_back(*r);
      }
      const int64_t nk = static_cast<int64_t>(krow.size());
      sc.assign(nk, 0.0f);
      const float* Q = q.data() + (t * Hq + h) * S;
      const Q8Row q8r = q8 ? q8_row(Q, S) : Q8Row{};  // a q8_0 cache: q8_0 scores, as SdpaAttrs::q8_0_scores
      for (int64_t j = 0; j < nk; ++j) {
        const float m = alibi.empty() ? 0.0f : alibi[h] * static_cast<float>(lo + j - p);
        const float* K = row(kc_out, krow[j], S, kbuf);
        sc[j] = (q8 ? attention_score_q8(q8r, q8_row(K, S), scale, softcap) : attention_score(Q, K, S, scale, softcap)) + m;  // SDPA adds its mask value here
      }
      attend_row(sc, [&](int64_t j) { return row(vc_out, krow[j], Sv, vbuf); }, Sv, out.data() + (t * Hq + h) * Sv);
    }
  }
  return std::vector<Tensor>{Tensor::from_f32(in[0].type(), {T, Hq * Sv}, out), kc_out, vc_out};
}

}  // namespace ggflow::ir
