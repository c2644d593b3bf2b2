// The generic dense transformer (llama, qwen2, gemma3), following llama.cpp's
// src/models/{llama,qwen2,gemma3}.cpp. Per layer, with x the residual stream f32 [E, T]:
//
//   cur = rms_norm(x) * attn_norm
//   q, k, v = wq·cur (+bq), wk·cur (+bk), wv·cur (+bv)        [H·D, T], [Hkv·D, T]
//   q, k   = reshape to heads [D, H, T]; (gemma3) rms_norm each head * q_norm / k_norm
//   q, k   = rope(q, inp_pos), rope(k, inp_pos)               (gemma3) q *= 1/sqrt(D)
//   cache  = set_rows(cache_k_lN, k, self_kv_idxs), same for v   [Hkv·D, KV]
//   o      = attention(q, cache_k, cache_v, mask)             [D, H, T] -> [H·D, T]
//   o      = wo·o; (last layer) o, x = get_rows(., inp_out_ids)
//   (gemma3) o = rms_norm(o) * post_attention_norm
//   x      = x + o
//   cur    = rms_norm(x) * ffn_norm; cur = down·(act(gate·cur) * (up·cur))
//   (gemma3) cur = rms_norm(cur) * post_ffw_norm
//   x      = x + cur
// logits = output·(rms_norm(x) * output_norm), output = token_embd when the file ties them.
#include <cmath>
#include <limits>

#include "builder/build.h"
#include "gguf/dequant.h"

namespace ggflow::builder {

using frontend::Ext;
using frontend::GgmlGlu;
using frontend::GgmlGraph;
using frontend::GgmlType;
using frontend::Ne;

std::string cache_k_name(int64_t layer) { return "cache_k_l" + std::to_string(layer); }
std::string cache_v_name(int64_t layer) { return "cache_v_l" + std::to_string(layer); }

namespace {

class Builder {
 public:
  Builder(const gguf::File& f, const HParams& hp, const BuildOptions& opt, GgmlGraph& g)
      : f_(f), hp_(hp), opt_(opt), g_(g) {}

  // A weight of the file, checked against the shape the architecture expects (GGML order).
  Result<int> weight(const std::string& name, Ne want, int n_dims) {
    const gguf::TensorInfo* t = f_.find_tensor(name);
    if (!t)
      return make_error("model is missing required tensor '" + name + "'",
                        "the file does not fit architecture '" + hp_.arch.name +
                            "': it is incomplete or was converted for another architecture");
    bool ok = static_cast<int>(t->ne.size()) == n_dims;
    for (int i = 0; ok && i < n_dims; ++i) ok = static_cast<int64_t>(t->ne[i]) == want[i].n;
    if (!ok) {
      std::string got;
      for (auto n : t->ne) got += (got.empty() ? "" : ", ") + std::to_string(n);
      std::string need;
      for (int i = 0; i < n_dims; ++i) need += (i ? ", " : "") + g_.ext_str(want[i]);
      return make_error("tensor '" + name + "' has shape [" + got + "], architecture '" + hp_.arch.name + "' needs [" +
                            need + "] for the file's hyper-parameters",
                        "the tensor and the metadata disagree; the file is damaged or was written by a broken converter");
    }
    // The types the kernels compute with: norms and biases in f32 (as every converter writes them),
    // matrices and the embedding in one of the 13 types the matmul and get_rows kernels read.
    const std::string_view type = gguf::traits(t->type).name;
    if (n_dims == 1 && t->type != GgmlType::F32)
      return make_error("tensor '" + name + "' has type " + std::string(type) + "; norm weights and biases must be F32",
                        "converters store 1-D tensors as F32; the file was written by a broken converter, re-convert it");
    if (n_dims == 2 && !gguf::can_dequantize(t->type))
      return make_error("tensor '" + name + "' has type " + std::string(type) + ", which ggflow cannot compute with",
                        "ggflow reads weights in F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and Q2_K..Q6_K; "
                        "re-quantize the model to one of them");
    return g_.weight(*t, f_.tensor_data(*t));
  }
  bool has(const std::string& name) const { return f_.find_tensor(name) != nullptr; }

  int rms(int x, int w) { return g_.mul(g_.rms_norm(x, hp_.rms_eps), w); }

  Status run() {
    const int64_t E = hp_.n_embd, D = hp_.head_dim, H = hp_.n_head, Hkv = hp_.n_head_kv, Ekv = hp_.n_embd_kv();
    const Ext T = g_.symbol("T"), KV = g_.symbol("KV"), O = g_.symbol("O");
    g_.keep_alive(f_.bytes());

    int tokens = g_.input("inp_tokens", GgmlType::I32, {T, 1, 1, 1});
    int pos = g_.input("inp_pos", GgmlType::I32, {T, 1, 1, 1});
    int out_ids = g_.input("inp_out_ids", GgmlType::I32, {O, 1, 1, 1});
    int kv_idxs = g_.input("self_kv_idxs", GgmlType::I64, {T, 1, 1, 1});
    int mask = g_.input("self_kq_mask", GgmlType::F32, {KV, T, 1, 1});
    int mask_swa = hp_.arch.swa_pattern ? g_.input("self_kq_mask_swa", GgmlType::F32, {KV, T, 1, 1}) : -1;

    auto tok_embd = weight("token_embd.weight", {E, hp_.n_vocab, 1, 1}, 2);
    if (!tok_embd) return tok_embd.error();
    int x = g_.get_rows(*tok_embd, tokens);                       // f32 [E, T]
    g_.set_name(x, "inp_embd");
    if (hp_.arch.embed_scale) x = g_.scale(x, std::sqrt(static_cast<float>(E)));

    for (int64_t il = 0; il < hp_.n_layer; ++il) {
      const std::string p = "blk." + std::to_string(il) + ".";
      const std::string sfx = "-" + std::to_string(il);
      auto W = [&](const std::string& n, Ne ne, int nd) { return weight(p + n, ne, nd); };
      auto attn_norm = W("attn_norm.weight", {E}, 1), wq = W("attn_q.weight", {E, H * D}, 2),
           wk = W("attn_k.weight", {E, Ekv}, 2), wv = W("attn_v.weight", {E, Ekv}, 2),
           wo = W("attn_output.weight", {H * D, E}, 2), ffn_norm = W("ffn_norm.weight", {E}, 1),
           gate = W("ffn_gate.weight", {E, hp_.n_ff}, 2), up = W("ffn_up.weight", {E, hp_.n_ff}, 2),
           down = W("ffn_down.weight", {hp_.n_ff, E}, 2);
      for (auto* r : {&attn_norm, &wq, &wk, &wv, &wo, &ffn_norm, &gate, &up, &down})
        if (!*r) return r->error();

      int cur = rms(x, *attn_norm);                                // f32 [E, T]
      g_.set_name(cur, "attn_norm" + sfx);
      int q = g_.mul_mat(*wq, cur), k = g_.mul_mat(*wk, cur), v = g_.mul_mat(*wv, cur);  // [H·D, T], [Ekv, T]
      if (hp_.arch.qkv_bias) {
        auto bq = W("attn_q.bias", {H * D}, 1), bk = W("attn_k.bias", {Ekv}, 1), bv = W("attn_v.bias", {Ekv}, 1);
        for (auto* r : {&bq, &bk, &bv})
          if (!*r) return r->error();
        q = g_.add(q, *bq), k = g_.add(k, *bk), v = g_.add(v, *bv);
      }
      q = g_.reshape(q, {D, H, T, 1});                             // [D, H, T]
      k = g_.reshape(k, {D, Hkv, T, 1});
      v = g_.reshape(v, {D, Hkv, T, 1});
      if (hp_.arch.qk_norm) {
        auto qn = W("attn_q_norm.weight", {D}, 1), kn = W("attn_k_norm.weight", {D}, 1);
        if (!qn) return qn.error();
        if (!kn) return kn.error();
        q = rms(q, *qn), k = rms(k, *kn);
      }
      bool swa = hp_.swa_layers[il];
      frontend::RopeParams rp;
      rp.n_dims = static_cast<int>(hp_.n_rot);
      rp.mode = hp_.arch.rope_neox ? frontend::kRopeNeox : 0;
      rp.n_ctx_orig = static_cast<int>(hp_.n_ctx_train);
      rp.freq_base = swa && hp_.arch.rope_base_swa > 0 ? hp_.arch.rope_base_swa : hp_.rope_base;
      rp.freq_scale = swa ? 1.0f : hp_.rope_scale;
      q = g_.rope(q, pos, std::nullopt, rp);
      k = g_.rope(k, pos, std::nullopt, rp);
      g_.set_name(q, "Qcur" + sfx);
      g_.set_name(k, "Kcur" + sfx);
      float kq_scale = 1.0f / std::sqrt(static_cast<float>(D));
      if (hp_.arch.q_scale_in_graph) q = g_.scale(q, hp_.attn_scale), kq_scale = 1.0f;

      // the cache: write this step's rows, then read all KV rows back as heads
      int ck = g_.input(cache_k_name(il), GgmlType::F32, {Ekv, KV, 1, 1});
      int cv = g_.input(cache_v_name(il), GgmlType::F32, {Ekv, KV, 1, 1});
      ck = g_.set_rows(ck, g_.reshape(k, {Ekv, T, 1, 1}), kv_idxs);   // [Ekv, KV]
      cv = g_.set_rows(cv, g_.reshape(v, {Ekv, T, 1, 1}), kv_idxs);
      g_.add_output(cache_k_name(il) + "_out", ck);
      g_.add_output(cache_v_name(il) + "_out", cv);
      int K = g_.permute(g_.reshape(ck, {D, Hkv, KV, 1}), 0, 2, 1, 3);  // [D, KV, Hkv]
      int V = g_.permute(g_.reshape(cv, {D, Hkv, KV, 1}), 0, 2, 1, 3);  // [D, KV, Hkv]
      int Q = g_.permute(q, 0, 2, 1, 3);                                 // [D, T, H]
      int m = swa ? mask_swa : mask;
      int o;
      if (opt_.flash_attn) {
        o = g_.flash_attn_ext(Q, K, V, m, kq_scale);                    // [D, H, T]
      } else {
        int kq = g_.soft_max(g_.mul_mat(K, Q), m, kq_scale);            // [KV, T, H]
        int Vt = g_.cont(g_.transpose(V));                              // [KV, D, Hkv]
        o = g_.permute(g_.mul_mat(Vt, kq), 0, 2, 1, 3);                 // [D, T, H] -> [D, H, T]
        o = g_.cont(o);
      }
      o = g_.reshape(o, {H * D, T, 1, 1});                               // [H·D, T]
      o = g_.mul_mat(*wo, o);                                            // [E, T]
      g_.set_name(o, "attn_out" + sfx);
      if (il == hp_.n_layer - 1) {  // only the rows that need logits go on
        o = g_.get_rows(o, out_ids);                                     // [E, O]
        x = g_.get_rows(x, out_ids);
      }
      if (hp_.arch.sandwich_norms) {
        auto pn = W("post_attention_norm.weight", {E}, 1);
        if (!pn) return pn.error();
        o = rms(o, *pn);
      }
      x = g_.add(o, x);
      cur = rms(x, *ffn_norm);
      int gcur = g_.mul_mat(*gate, cur), ucur = g_.mul_mat(*up, cur);   // [F, T]
      cur = g_.glu_split(hp_.arch.ffn_act == FfnAct::silu ? GgmlGlu::SWIGLU : GgmlGlu::GEGLU, gcur, ucur);
      cur = g_.mul_mat(*down, cur);                                       // [E, T]
      if (hp_.arch.sandwich_norms) {
        auto pn = W("post_ffw_norm.weight", {E}, 1);
        if (!pn) return pn.error();
        cur = rms(cur, *pn);
      }
      x = g_.add(cur, x);
      g_.set_name(x, "l_out" + sfx);
    }
    auto onorm = weight("output_norm.weight", {E}, 1);
    if (!onorm) return onorm.error();
    int out = *tok_embd;
    if (has("output.weight")) {
      auto w = weight("output.weight", {E, hp_.n_vocab}, 2);
      if (!w) return w.error();
      out = *w;
    }
    int logits = g_.mul_mat(out, rms(x, *onorm));                         // f32 [V, O]
    g_.set_name(logits, "result_output");
    g_.add_output("logits", logits);
    return g_.status();
  }

 private:
  const gguf::File& f_;
  const HParams& hp_;
  const BuildOptions& opt_;
  GgmlGraph& g_;
};

}  // namespace

Result<BuiltModel> build(const gguf::File& file, const BuildOptions& opt) {
  auto hp = read_hparams(file);
  if (!hp) return hp.error();
  BuiltModel m;
  m.hp = std::move(*hp);
  Builder b(file, m.hp, opt, m.graph);
  if (auto s = b.run(); !s) return s.error();
  return m;
}

}  // namespace ggflow::builder
