// Small raw-layout graphs built the way the frontend's translators build them (DESIGN.md section 3):
//   get_rows(table, inp_tokens [1,1,1,T]) = Unsqueeze(0) <- Convert? <- Gather(table, axis 0) <- Squeeze(0,1)
// and a one-layer decoder with Q/K/V projections, RoPE, a SET_ROWS cache write (ScatterUpdate),
// SDPA with an additive mask, the last-layer inp_out_ids row gathers and a tied LM head.
#pragma once

#include <string>
#include <vector>

#include "ir/ir.h"
#include "ir/verifier.h"

namespace ggflow::transforms::testing {

using namespace ggflow::ir;

inline Symbol sym_T() { static Symbol s = Symbol::named("T"); return s; }
inline Symbol sym_O() { static Symbol s = Symbol::named("O"); return s; }
inline Symbol sym_KV() { static Symbol s = Symbol::named("KV"); return s; }

inline constexpr int64_t kVocab = 10;

// table [V, H]: row r = {r, r + 0.125, r + 0.25, ...} (distinct values per row and column)
inline Tensor table(int64_t H, float offset = 0.0f) {
  std::vector<float> w(kVocab * H);
  for (int64_t r = 0; r < kVocab; ++r)
    for (int64_t c = 0; c < H; ++c) w[r * H + c] = offset + static_cast<float>(r) + 0.125f * static_cast<float>(c);
  return Tensor::f32({kVocab, H}, w);
}

// translate_get_rows: Squeeze(0,1) -> Gather(axis 0) -> Convert? -> Unsqueeze(0), named `name`.
struct GetRows {
  NodePtr squeeze, gather, convert, unsqueeze;
};
inline GetRows get_rows(Value table_v, Value indices, const std::string& name, bool convert = false) {
  GetRows g;
  g.squeeze = ops::squeeze(indices, {0, 1});                       // i32 [1,T]
  g.gather = ops::gather(table_v, g.squeeze, 0);                   // [1,T,H]
  g.gather->set_name(name + "_gather");
  Value rows = g.gather;
  if (convert) {
    g.convert = ops::convert(g.gather, ElementType::f32);
    rows = g.convert;
  }
  g.unsqueeze = ops::unsqueeze(rows, {0});                         // [1,1,T,H]
  g.unsqueeze->set_name(name);
  g.unsqueeze->out_names().insert(name);
  g.unsqueeze->rt_info()["origin"] = std::string("GET_ROWS");
  return g;
}

inline NodePtr tokens_param() { return ops::parameter(ElementType::i32, {1, 1, 1, sym_T()}, "inp_tokens"); }

// Tied LM head: Result 'logits' <- MatMul(x, table, transpose_b)
inline NodePtr lm_head(Value x, Value tbl) { return ops::result(ops::matmul(x, tbl, false, true), "logits"); }

// Embedding graph of tests 1-4: inp_tokens -> get_rows(token_embd) -> Result 'embd', + logits.
struct EmbdModel {
  GetRows main, second, other;
  Model model;
};
struct EmbdOpts {
  bool convert = false;       // f16 table + Convert (test 2)
  bool second = false;        // a second token lookup named pe_tok_flat (test 4)
  bool other = false;         // a lookup rooted at inp_pos (test 4: left alone)
};
inline EmbdModel embd_model(const EmbdOpts& o = {}) {
  EmbdModel m;
  const int64_t H = 4;
  auto tokens = tokens_param();
  Tensor tw = table(H);
  if (o.convert) tw = Tensor::from_f32(ElementType::f16, {kVocab, H}, tw.to_f32());
  auto tbl = ops::constant(tw, "token_embd.weight");
  m.main = get_rows(tbl, tokens, "inp_embd", o.convert);
  std::vector<NodePtr> results{ops::result(m.main.unsqueeze, "embd")};
  std::vector<NodePtr> params{tokens};
  Value x = m.main.unsqueeze;
  if (o.second) {
    auto t2 = ops::constant(table(H, 100.0f), "per_layer_token_embd.weight");
    m.second = get_rows(t2, tokens, "pe_tok_flat");
    results.push_back(ops::result(m.second.unsqueeze, "pe"));
    x = ops::add(x, m.second.unsqueeze);
  }
  if (o.other) {
    auto pos = ops::parameter(ElementType::i32, {1, 1, 1, sym_T()}, "inp_pos");
    params.push_back(pos);
    m.other = get_rows(ops::constant(table(H, 200.0f), "pos_table"), pos, "pos_lookup");
    results.push_back(ops::result(m.other.unsqueeze, "pos_rows"));
  }
  Value head_w = o.convert ? Value(ops::convert(tbl, ElementType::f32)) : Value(tbl);
  results.push_back(lm_head(x, head_w));
  m.model = Model(results, params);
  return m;
}

}  // namespace ggflow::transforms::testing

namespace ggflow::transforms::testing {

// A one-layer decoder in the raw layout, as the builder + translators make it (E = 8, GQA 4/2,
// head size 2): zero Wq/Wk, Wv copies embedding dims 0..3, identity-like LM head [V=10, 8].
// Then attention is the running mean of the embeddings' first 4 dims (per kv head), and
// logits[t][0..7] = embd[t] + attn[t].
struct Decoder {
  static constexpr int64_t E = 8, H = 4, Hkv = 2, D = 2;
  Model model;
};
inline Decoder decoder() {
  using namespace ir::ops;
  const int64_t E = Decoder::E, H = Decoder::H, Hkv = Decoder::Hkv, D = Decoder::D, Ekv = Hkv * D;
  auto tokens = tokens_param();
  auto pos = parameter(ElementType::i32, {1, 1, 1, sym_T()}, "inp_pos");
  auto out_ids = parameter(ElementType::i32, {1, 1, 1, sym_O()}, "inp_out_ids");
  auto kv_idxs = parameter(ElementType::i64, {1, 1, 1, sym_T()}, "self_kv_idxs");
  auto mask = parameter(ElementType::f32, {1, 1, sym_T(), sym_KV()}, "self_kq_mask");
  auto ck = parameter(ElementType::f32, {1, 1, sym_KV(), Ekv}, "cache_k_l0");
  auto cv = parameter(ElementType::f32, {1, 1, sym_KV(), Ekv}, "cache_v_l0");
  auto x = get_rows(constant(table(E), "token_embd.weight"), tokens, "inp_embd").unsqueeze;   // [1,1,T,E]
  std::vector<float> wv(Ekv * E, 0.0f), wo(kVocab * E, 0.0f);
  for (int64_t i = 0; i < Ekv; ++i) wv[i * E + i] = 1.0f;
  for (int64_t i = 0; i < E; ++i) wo[i * E + i] = 1.0f;
  auto q = matmul(x, constant(Tensor::f32({H * D, E}, std::vector<float>(H * D * E, 0.0f)), "wq"), false, true);
  auto k = matmul(x, constant(Tensor::f32({Ekv, E}, std::vector<float>(Ekv * E, 0.0f)), "wk"), false, true);
  auto v = matmul(x, constant(Tensor::f32({Ekv, E}, wv), "wv"), false, true);            // [1,1,T,Ekv]
  auto qh = reshape(q, std::vector<int64_t>{0, -1, H, D}, true);                          // [1,T,H,D]
  auto kh = reshape(k, std::vector<int64_t>{0, -1, Hkv, D}, true);
  RopeAttrs ra;
  ra.n_dims = D;
  auto rq = rope(qh, reshape(pos, slice(shape_of(qh), {0}, {2}, {1}, {0})), ra);          // [1,T,H,D]
  auto rk = rope(kh, reshape(pos, slice(shape_of(kh), {0}, {2}, {1}, {0})), ra);
  auto krows = reshape(rk, std::vector<int64_t>{0, 1, -1, Ekv}, true);                    // [1,1,T,Ekv]
  auto vrows = reshape(v, std::vector<int64_t>{0, 1, -1, Ekv}, true);
  auto idx = reshape(kv_idxs, std::vector<int64_t>{-1});
  auto ck2 = scatter_update(ck, idx, krows, 2), cv2 = scatter_update(cv, idx, vrows, 2);  // [1,1,KV,Ekv]
  auto K = transpose(reshape(ck2, std::vector<int64_t>{0, -1, Hkv, D}, true), {0, 2, 1, 3});  // [1,Hkv,KV,D]
  auto V = transpose(reshape(cv2, std::vector<int64_t>{0, -1, Hkv, D}, true), {0, 2, 1, 3});
  auto o = sdpa(transpose(rq, {0, 2, 1, 3}), K, V, mask, false, 0.5f);                       // [1,H,T,D]
  auto o2 = reshape(transpose(o, {0, 2, 1, 3}), std::vector<int64_t>{0, 1, -1, H * D}, true);  // [1,1,T,E]
  auto rows = [&](Value a) {  // the builder's last-layer get_rows(a, inp_out_ids)
    return unsqueeze(gather(squeeze(a, {0, 1}), squeeze(out_ids, {0, 1}), 0), {0});        // [1,1,O,E]
  };
  auto h = add(rows(o2), rows(x));
  auto logits = result(matmul(h, constant(Tensor::f32({kVocab, E}, wo), "output.weight"), false, true), "logits");
  Decoder d;
  d.model = Model({logits, result(ck2, "cache_k_l0_out"), result(cv2, "cache_v_l0_out")},
                  {tokens, pos, out_ids, kv_idxs, mask, ck, cv});
  return d;
}

}  // namespace ggflow::transforms::testing
