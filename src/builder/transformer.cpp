// The generic dense transformer (the architectures of arch.cpp), following llama.cpp's
// src/models/<arch>.cpp. Per layer, with x the residual stream f32 [E, T]:
//
//   cur = rms_norm(x) * attn_norm
//   q, k, v = wq·cur (+bq), wk·cur (+bk), wv·cur (+bv)        [H·D, T], [Hkv·D, T]
//            (phi3) wq, wk, wv are the row ranges of the fused attn_qkv: each output row is the
//            same dot product, so the split matmuls give the fused one's bits
//   q, k   = reshape to heads [D, H, T]; (qwen3, gemma3) rms_norm each head * q_norm / k_norm
//   q, k   = rope(q, inp_pos, freq_factors)                   (gemma, phi3) q *= attn_scale
//            freq_factors: rope_freqs (llama 3) or rope_factors_short/long (phi3 LongRoPE)
//   cache  = set_rows(cache_k_lN, k, self_kv_idxs), same for v   [Hkv·D, KV]
//   o      = attention(q, cache_k, cache_v, mask)             [D, H, T] -> [H·D, T]
//            (gemma2) scores soft-capped: cap·tanh(s / cap) before the mask
//   o      = wo·o; (last layer) o, x = get_rows(., inp_out_ids)
//   (gemma3) o = rms_norm(o) * post_attention_norm
//   x      = x + o
//   cur    = rms_norm(x) * ffn_norm; cur = down·(act(gate·cur) * (up·cur))
//            (phi3) gate and up are the two row halves of the fused ffn_up
//   (gemma3) cur = rms_norm(cur) * post_ffw_norm
//   x      = x + cur
// logits = output·(rms_norm(x) * output_norm), output = token_embd when the file ties them;
// (gemma2) logits = cap·tanh(logits / cap).
// Every tensor of the file must be read by the graph: one the architecture does not use (a
// rope_freqs of a family without it, an extra bias) is an error, never silently dropped.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "builder/build.h"
#include "gguf/dequant.h"
#include "gguf/quantize.h"

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
    used_.insert(name);
    auto w = file_weight(*t, n_dims);
    if (!w) return w.error();
    if (n_dims == 2) add_lora_halves(name, *w);
    return *w;
  }
  // The graph's node for a checked weight: the file's bytes, or a requantized copy (BuildOptions::requant).
  Result<int> file_weight(const gguf::TensorInfo& t, int n_dims) {
    if (!opt_.requant || n_dims != 2 || t.name == head_name() || t.type == *opt_.requant || t.ne[0] % 32 != 0)
      return g_.weight(t, f_.tensor_data(t));
    auto q = gguf::requantize(t.type, f_.tensor_data(t), t.n_elements, *opt_.requant);
    if (!q) return make_error("cannot requantize '" + std::string(t.name) + "': " + q.error().what, q.error().hint);
    auto bytes = std::make_shared<const std::vector<uint8_t>>(std::move(*q));
    const Ne ne{Ext(static_cast<int64_t>(t.ne[0])), Ext(static_cast<int64_t>(t.ne[1])), Ext(1), Ext(1)};
    return g_.weight(std::string(t.name), *opt_.requant, ne, 2, std::span<const uint8_t>(*bytes), bytes);
  }
  bool has(const std::string& name) const { return f_.find_tensor(name) != nullptr; }
  // The LM head's tensor: output.weight, or the embedding where the model ties them.
  std::string head_name() const { return has("output.weight") ? "output.weight" : "token_embd.weight"; }

  // The adapters' halves for the matrix `name` (graph id w), to be added by mm().
  void add_lora_halves(const std::string& name, int w) {
    for (size_t i = 0; i < opt_.loras.size(); ++i) {
      const LoraAdapter& ad = *opt_.loras[i];
      auto it = ad.pairs.find(name);
      if (it == ad.pairs.end()) continue;
      auto half = [&](const gguf::TensorInfo& t) {
        const Ne ne{Ext(static_cast<int64_t>(t.ne[0])), Ext(static_cast<int64_t>(t.ne[1])), Ext(1), Ext(1)};
        return g_.weight("lora" + std::to_string(i) + "." + std::string(t.name), t.type, ne, 2, ad.file.tensor_data(t), nullptr);
      };
      lora_of_[w].push_back({i, half(*it->second.first), half(*it->second.second)});
      lora_used_.insert({i, name});
    }
  }

  // W·x, plus each adapter's delta weighted per token (lora.h): llama.cpp's build_lora_mm, with
  // its scale made a per-token input.
  int mm(int w, int x) {
    int y = g_.mul_mat(w, x);
    auto it = lora_of_.find(w);
    if (it == lora_of_.end()) return y;
    for (const LoraUse& l : it->second)
      y = g_.add(y, g_.mul(g_.mul_mat(l.b, g_.mul_mat(l.a, x)), lora_scale_[l.adapter]));
    return y;
  }

  // Rows [r0, r0 + n) of a 2-D weight already read by weight(): a view of the same bytes (a
  // row of any GGML type is whole blocks, contiguous), for the fused tensors of phi3.
  int rows(int w, int64_t r0, int64_t n, const std::string& part) {
    if (lora_of_.count(w) && lora_error_.empty()) lora_error_ = g_.tensor(w).name;
    const auto& t = g_.tensor(w);
    const size_t row_bytes = gguf::row_bytes(t.type, static_cast<uint64_t>(t.ne[0].n));
    const Ne ne{t.ne[0], Ext(n), Ext(1), Ext(1)};
    return g_.weight(t.name + "[" + part + "]", t.type, ne, 2,
                     t.data.subspan(static_cast<size_t>(r0) * row_bytes, static_cast<size_t>(n) * row_bytes),
                     nullptr);  // the file's bytes: kept alive by keep_alive(f_.bytes()) in run()
  }

  // The RoPE frequency factors of the file, or none: rope_freqs (llama 3), rope_factors_short or,
  // for contexts beyond the original one, rope_factors_long (phi3), as llama.cpp picks them.
  Result<std::optional<int>> rope_factors() {
    std::string name;
    if (hp_.arch.rope_freqs && has("rope_freqs.weight")) name = "rope_freqs.weight";
    const bool any_global = std::find(hp_.swa_layers.begin(), hp_.swa_layers.end(), false) != hp_.swa_layers.end();
    if (hp_.arch.rope_freqs_global && any_global) name = "rope_freqs.weight";  // gemma4: required, as llama.cpp
    if (hp_.arch.rope_long_short && has("rope_factors_short.weight")) {
      if (!has("rope_factors_long.weight"))
        return make_error("model has 'rope_factors_short.weight' but no 'rope_factors_long.weight'",
                          "LongRoPE needs both; the file is damaged or was written by a broken converter");
      const bool longer = opt_.n_ctx > hp_.n_ctx_orig;
      name = longer ? "rope_factors_long.weight" : "rope_factors_short.weight";
      used_.insert(longer ? "rope_factors_short.weight" : "rope_factors_long.weight");  // chosen against, not ignored
    }
    if (name.empty()) return std::optional<int>();
    auto w = weight(name, {hp_.n_rot / 2}, 1);
    if (!w) return w.error();
    return std::optional<int>(*w);
  }

  // A tensor of the file that the graph did not read.
  Status check_all_used() const {
    if (!lora_error_.empty())
      return make_error("a LoRA adapter adapts '" + lora_error_ + "', which architecture '" + hp_.arch.name +
                            "' splits into several products; ggflow cannot apply LoRA to it",
                        "leave the fused matrix out of the adapter");
    for (size_t i = 0; i < opt_.loras.size(); ++i)
      for (const auto& [w, pair] : opt_.loras[i]->pairs)
        if (!lora_used_.count({i, w}))
          return make_error("LoRA adapter '" + opt_.loras[i]->path() + "' adapts '" + w + "', which is not a matrix product of architecture '" +
                                hp_.arch.name + "'",
                            "ggflow applies LoRA to the matrix products only; leave '" + w + "' out of the adapter");
    for (const auto& t : f_.tensors()) {
      std::string name(t.name);
      if (used_.count(name)) continue;
      return make_error("tensor '" + name + "' is in the file but architecture '" + hp_.arch.name +
                            "' does not use it; ggflow refuses it rather than compute different logits than the model intends",
                        "the file was converted for another architecture or carries a feature ggflow does not support");
    }
    return {};
  }

  // cap·tanh(x / cap), GGML's three ops (llama.cpp's final logit soft-capping).
  int softcap(int x, float cap) { return g_.scale(g_.unary(frontend::GgmlUnary::TANH, g_.scale(x, 1.0f / cap)), cap); }

  int rms(int x, int w) { return g_.mul(g_.rms_norm(x, hp_.rms_eps), w); }

  // gemma4's per-layer inputs (llama.cpp build_inp_per_layer + project_per_layer_inputs), computed
  // per layer from: the second token table's rows for the step's tokens, and the scaled embeddings.
  struct PerLayerInputs {
    int tok_rows = -1;   // f32 [Epl·L, T]: get_rows(per_layer_token_embd, inp_tokens)
    int embd = -1;       // f32 [E, T]: the scaled embeddings
    int model_proj = -1, proj_norm = -1;
  };
  Status per_layer_inputs(int tokens, int embd, PerLayerInputs& ple) {
    const int64_t Epl = hp_.n_embd_per_layer, L = hp_.n_layer, E = hp_.n_embd;
    auto tbl = weight("per_layer_token_embd.weight", {Epl * L, hp_.n_vocab}, 2);
    auto mp = weight("per_layer_model_proj.weight", {E, Epl * L}, 2);
    auto pn = weight("per_layer_proj_norm.weight", {Epl}, 1);
    for (auto* r : {&tbl, &mp, &pn})
      if (!*r) return r->error();
    ple.tok_rows = g_.get_rows(*tbl, tokens);                    // [Epl·L, T]: the second token-table lookup
    g_.set_name(ple.tok_rows, "inp_per_layer");
    ple.embd = embd, ple.model_proj = *mp, ple.proj_norm = *pn;
    return {};
  }
  // Layer il's input [Epl, T] = (rms_norm(Wp_il·embd / √E) * proj_norm + tok_il · √Epl) / √2, where
  // Wp_il and tok_il are layer il's rows of the projection and columns of the token rows: every
  // element is the one llama.cpp computes on the whole [Epl, L, T] tensor. Then the block:
  // x + rms_norm(proj · (gelu(inp_gate · x) * input)) * post_norm.
  Status add_per_layer_input(int64_t il, int out_ids, const PerLayerInputs& ple, int& x) {
    const int64_t Epl = hp_.n_embd_per_layer, L = hp_.n_layer, E = hp_.n_embd;
    const std::string p = "blk." + std::to_string(il) + ".";
    auto gate = weight(p + "inp_gate.weight", {E, Epl}, 2), proj = weight(p + "proj.weight", {Epl, E}, 2),
         post = weight(p + "post_norm.weight", {E}, 1);
    for (auto* r : {&gate, &proj, &post})
      if (!*r) return r->error();
    const Ext T = g_.tensor(ple.tok_rows).ne[1];
    int tok = g_.view(ple.tok_rows, {Epl, T, 1, 1}, {4, Epl * L * 4, 0, 0}, il * Epl * 4);   // [Epl, T]
    tok = g_.scale(tok, std::sqrt(static_cast<float>(Epl)));
    int pr = g_.mul_mat(rows(ple.model_proj, il * Epl, Epl, "l" + std::to_string(il)), ple.embd);  // [Epl, T]
    pr = rms(g_.scale(pr, 1.0f / std::sqrt(static_cast<float>(E))), ple.proj_norm);
    int in = g_.scale(g_.add(pr, tok), 1.0f / std::sqrt(2.0f));
    if (il == hp_.n_layer - 1) in = g_.get_rows(in, out_ids);        // [Epl, O], as x
    int cur = g_.unary(frontend::GgmlUnary::GELU, mm(*gate, x));   // [Epl, T]
    cur = rms(mm(*proj, g_.mul(cur, in)), *post);               // [E, T]
    x = g_.add(x, cur);
    return {};
  }

  Status run() {
    const int64_t E = hp_.n_embd;
    const Ext T = g_.symbol("T"), KV = g_.symbol("KV"), O = g_.symbol("O");
    g_.keep_alive(f_.bytes());

    int tokens = g_.input("inp_tokens", GgmlType::I32, {T, 1, 1, 1});
    int pos = g_.input("inp_pos", GgmlType::I32, {T, 1, 1, 1});
    int out_ids = g_.input("inp_out_ids", GgmlType::I32, {O, 1, 1, 1});
    int kv_idxs = g_.input("self_kv_idxs", GgmlType::I64, {T, 1, 1, 1});
    int mask = g_.input("self_kq_mask", GgmlType::F32, {KV, T, 1, 1});
    const bool any_swa = std::find(hp_.swa_layers.begin(), hp_.swa_layers.end(), true) != hp_.swa_layers.end();
    int mask_swa = any_swa ? g_.input("self_kq_mask_swa", GgmlType::F32, {KV, T, 1, 1}) : -1;
    for (size_t i = 0; i < opt_.loras.size(); ++i) {
      g_.keep_alive(opt_.loras[i]->file.bytes());
      lora_scale_.push_back(g_.input(lora_scale_name(i), GgmlType::F32, {Ext(1), T, 1, 1}));
    }
    auto factors = rope_factors();
    if (!factors) return factors.error();

    auto tok_embd = weight("token_embd.weight", {E, hp_.n_vocab, 1, 1}, 2);
    if (!tok_embd) return tok_embd.error();
    int x = g_.get_rows(*tok_embd, tokens);                       // f32 [E, T]
    g_.set_name(x, "inp_embd");
    if (hp_.arch.embed_scale) x = g_.scale(x, std::sqrt(static_cast<float>(E)));
    PerLayerInputs ple;
    if (hp_.arch.per_layer_embd) {
      if (auto s = per_layer_inputs(tokens, x, ple); !s) return s;
    }

    std::vector<std::pair<int, int>> caches(hp_.n_layer, {-1, -1});  // per layer with a cache: K, V after this step's rows
    for (int64_t il = 0; il < hp_.n_layer; ++il) {
      const std::string p = "blk." + std::to_string(il) + ".";
      const std::string sfx = "-" + std::to_string(il);
      // this layer's widths: the per-layer arrays and the sliding layers' head size (gemma4)
      const int64_t D = hp_.dim(il), H = hp_.heads(il), Hkv = hp_.kv_heads(il), Ekv = Hkv * D, F = hp_.ff(il);
      const bool own_kv = hp_.has_kv(il);
      auto W = [&](const std::string& n, Ne ne, int nd) { return weight(p + n, ne, nd); };
      const bool fused_qkv = hp_.arch.fused_qkv && has(p + "attn_qkv.weight");
      const bool fused_gate_up = hp_.arch.fused_gate_up && !has(p + "ffn_gate.weight");
      // gemma4: a layer without attn_v uses its K projection as V (llama.cpp: "use_alternative_attention")
      const bool v_is_k = hp_.arch.optional_v && !fused_qkv && !has(p + "attn_v.weight");
      Result<int> wq = 0, wk = 0, wv = 0, gate = 0, up = 0;
      if (fused_qkv) {
        auto qkv = W("attn_qkv.weight", {E, H * D + 2 * Ekv}, 2);
        if (!qkv) return qkv.error();
        wq = rows(*qkv, 0, H * D, "q"), wk = rows(*qkv, H * D, Ekv, "k"), wv = rows(*qkv, H * D + Ekv, Ekv, "v");
      } else {
        wq = W("attn_q.weight", {E, H * D}, 2);
        if (own_kv) wk = W("attn_k.weight", {E, Ekv}, 2);
        if (own_kv && !v_is_k) wv = W("attn_v.weight", {E, Ekv}, 2);
      }
      if (!own_kv)  // llama.cpp loads a shared layer's K/V weights when the file has them and never reads them
        for (const char* n : {"attn_k.weight", "attn_v.weight", "attn_k_norm.weight"})
          if (has(p + n)) used_.insert(p + n);
      if (fused_gate_up) {
        auto gu = W("ffn_up.weight", {E, 2 * F}, 2);
        if (!gu) return gu.error();
        gate = rows(*gu, 0, F, "gate"), up = rows(*gu, F, F, "up");
      } else {
        gate = W("ffn_gate.weight", {E, F}, 2), up = W("ffn_up.weight", {E, F}, 2);
      }
      auto attn_norm = W("attn_norm.weight", {E}, 1), wo = W("attn_output.weight", {H * D, E}, 2),
           ffn_norm = W("ffn_norm.weight", {E}, 1), down = W("ffn_down.weight", {F, E}, 2);
      for (auto* r : {&attn_norm, &wq, &wk, &wv, &wo, &ffn_norm, &gate, &up, &down})
        if (!*r) return r->error();

      int cur = rms(x, *attn_norm);                                // f32 [E, T]
      g_.set_name(cur, "attn_norm" + sfx);
      int q = mm(*wq, cur);                                // [H·D, T]
      int k = -1, v = -1;
      if (own_kv) {
        k = mm(*wk, cur);                                  // [Ekv, T]
        v = v_is_k ? k : mm(*wv, cur);
      }
      if (hp_.arch.qkv_bias && own_kv) {  // (no family has both biases and shared KV layers)
        auto bq = W("attn_q.bias", {H * D}, 1), bk = W("attn_k.bias", {Ekv}, 1), bv = W("attn_v.bias", {Ekv}, 1);
        for (auto* r : {&bq, &bk, &bv})
          if (!*r) return r->error();
        q = g_.add(q, *bq), k = g_.add(k, *bk), v = g_.add(v, *bv);
      }
      q = g_.reshape(q, {D, H, T, 1});                             // [D, H, T]
      if (hp_.arch.qk_norm) {
        auto qn = W("attn_q_norm.weight", {D}, 1);
        if (!qn) return qn.error();
        q = rms(q, *qn);
      }
      const bool swa = hp_.swa_layers[il];
      frontend::RopeParams rp;
      rp.n_dims = static_cast<int>(hp_.rot(il));
      rp.mode = hp_.arch.rope_neox ? frontend::kRopeNeox : 0;
      rp.n_ctx_orig = static_cast<int>(hp_.n_ctx_train);
      rp.freq_base = swa ? hp_.rope_base_swa : hp_.rope_base;
      rp.freq_scale = swa ? hp_.rope_scale_swa : hp_.rope_scale;
      rp.attn_factor = hp_.rope_attn_factor;
      const std::optional<int> ff = swa && hp_.arch.rope_freqs_global ? std::nullopt : *factors;  // gemma4: full layers only
      q = g_.rope(q, pos, ff, rp);
      g_.set_name(q, "Qcur" + sfx);
      float kq_scale = hp_.arch.unit_attn_scale ? 1.0f : 1.0f / std::sqrt(static_cast<float>(D));
      if (hp_.arch.q_scale_in_graph) q = g_.scale(q, hp_.attn_scale), kq_scale = 1.0f;

      if (own_kv) {
        k = g_.reshape(k, {D, Hkv, T, 1});                         // [D, Hkv, T]
        v = g_.reshape(v, {D, Hkv, T, 1});
        if (hp_.arch.qk_norm) {
          auto kn = W("attn_k_norm.weight", {D}, 1);
          if (!kn) return kn.error();
          k = rms(k, *kn);
        }
        if (hp_.arch.v_norm) v = g_.rms_norm(v, hp_.rms_eps);      // gemma4: no weight
        k = g_.rope(k, pos, ff, rp);
        g_.set_name(k, "Kcur" + sfx);
        // the cache: write this step's rows
        // a q8_0 cache: the rows rounded to q8_0 and back (cast, cast) into an f32 cache, so that
        // every layout holds the same values; the paged layout stores them as q8_0 blocks
        const bool q8 = opt_.kv_type == gguf::GgmlType::Q8_0;
        const gguf::GgmlType ct = q8 ? gguf::GgmlType::F32 : opt_.kv_type;
        auto rows = [&](int x) {
          x = g_.reshape(x, {Ekv, T, 1, 1});                              // [Ekv, T]
          return q8 ? g_.cast(g_.cast(x, gguf::GgmlType::Q8_0), gguf::GgmlType::F32) : x;
        };
        int ck = g_.input(cache_k_name(il), ct, {Ekv, KV, 1, 1});
        int cv = g_.input(cache_v_name(il), ct, {Ekv, KV, 1, 1});
        ck = g_.set_rows(ck, rows(k), kv_idxs);                          // [Ekv, KV]
        cv = g_.set_rows(cv, rows(v), kv_idxs);
        g_.add_output(cache_k_name(il) + "_out", ck);
        g_.add_output(cache_v_name(il) + "_out", cv);
        caches[il] = {ck, cv};
      }
      // read all KV rows back as heads: this layer's cache, or (a shared layer) its source layer's
      const auto [ck, cv] = caches[hp_.kv_source(il)];
      int K = g_.permute(g_.reshape(ck, {D, Hkv, KV, 1}), 0, 2, 1, 3);  // [D, KV, Hkv]
      int V = g_.permute(g_.reshape(cv, {D, Hkv, KV, 1}), 0, 2, 1, 3);  // [D, KV, Hkv]
      int Q = g_.permute(q, 0, 2, 1, 3);                                 // [D, T, H]
      int m = swa ? mask_swa : mask;
      int o;
      if (opt_.flash_attn) {
        // a q8_0 cache reaches FLASH_ATTN_EXT as q8_0 keys (llama.cpp's view of its cache; exact:
        // the rows were rounded through q8_0 when written), so its scores are q8_0 dot products
        if (opt_.kv_type == gguf::GgmlType::Q8_0) K = g_.cast(K, gguf::GgmlType::Q8_0);
        o = g_.flash_attn_ext(Q, K, V, m, kq_scale, 0.0f, hp_.attn_softcap);  // [D, H, T]
      } else {
        int kq = g_.mul_mat(K, Q);                                      // [KV, T, H]
        if (hp_.attn_softcap > 0) kq = softcap(kq, hp_.attn_softcap);
        kq = g_.soft_max(kq, m, kq_scale);
        int Vt = g_.cont(g_.transpose(V));                              // [KV, D, Hkv]
        o = g_.permute(g_.mul_mat(Vt, kq), 0, 2, 1, 3);                 // [D, T, H] -> [D, H, T]
        o = g_.cont(o);
      }
      o = g_.reshape(o, {H * D, T, 1, 1});                               // [H·D, T]
      o = mm(*wo, o);                                            // [E, T]
      g_.set_name(o, "attn_out" + sfx);
      if (il == hp_.n_layer - 1) {  // only the rows that need logits go on
        o = g_.get_rows(o, out_ids);                                     // [E, O]
        x = g_.get_rows(x, out_ids);
        for (int& s : lora_scale_) s = g_.get_rows(s, out_ids);         // [1, O]
      }
      if (hp_.arch.sandwich_norms) {
        auto pn = W("post_attention_norm.weight", {E}, 1);
        if (!pn) return pn.error();
        o = rms(o, *pn);
      }
      x = g_.add(o, x);
      cur = rms(x, *ffn_norm);
      int gcur = mm(*gate, cur), ucur = mm(*up, cur);   // [F, T]
      cur = g_.glu_split(hp_.arch.ffn_act == FfnAct::silu ? GgmlGlu::SWIGLU : GgmlGlu::GEGLU, gcur, ucur);
      cur = mm(*down, cur);                                       // [E, T]
      if (hp_.arch.sandwich_norms) {
        auto pn = W("post_ffw_norm.weight", {E}, 1);
        if (!pn) return pn.error();
        cur = rms(cur, *pn);
      }
      x = g_.add(cur, x);
      if (hp_.arch.per_layer_embd) {
        if (auto s = add_per_layer_input(il, out_ids, ple, x); !s) return s;
      }
      if (hp_.arch.layer_out_scale && has(p + "layer_output_scale.weight")) {
        auto sc = W("layer_output_scale.weight", {1}, 1);
        if (!sc) return sc.error();
        x = g_.mul(x, *sc);
      }
      g_.set_name(x, "l_out" + sfx);
    }
    auto onorm = weight("output_norm.weight", {E}, 1);
    if (!onorm) return onorm.error();
    int out = *tok_embd;
    const std::string out_name = head_name();
    if (out_name == "output.weight") {
      auto w = weight("output.weight", {E, hp_.n_vocab}, 2);
      if (!w) return w.error();
      out = *w;
    }
    if (opt_.logit_rows > 0 && opt_.logit_rows < hp_.n_vocab) {  // the head's first rows: a prefix of its bytes
      const gguf::TensorInfo& t = *f_.find_tensor(out_name);
      const auto bytes = size_t(gguf::row_bytes(t.type, uint64_t(E)) * uint64_t(opt_.logit_rows));
      out = g_.weight(out_name + "[:" + std::to_string(opt_.logit_rows) + "]", t.type,
                      Ne{Ext(E), Ext(opt_.logit_rows), Ext(1), Ext(1)}, 2, f_.tensor_data(t).subspan(0, bytes), nullptr);
    }
    int logits = g_.mul_mat(out, rms(x, *onorm));  // no LoRA on the LM head (lora.h)                         // f32 [V, O]
    if (hp_.final_softcap > 0) logits = softcap(logits, hp_.final_softcap);
    g_.set_name(logits, "result_output");
    if (auto s = check_all_used(); !s) return s;
    g_.add_output("logits", logits);
    return g_.status();
  }

 private:
  const gguf::File& f_;
  const HParams& hp_;
  const BuildOptions& opt_;
  GgmlGraph& g_;
  std::set<std::string> used_;  // the file's tensors the graph reads
  struct LoraUse {
    size_t adapter;
    int a, b;  // the halves' graph ids
  };
  std::map<int, std::vector<LoraUse>> lora_of_;        // matrix graph id -> adapters on it
  std::set<std::pair<size_t, std::string>> lora_used_;  // (adapter, matrix) pairs in the graph
  std::vector<int> lora_scale_;                        // per adapter: f32 [1, T], [1, O] after the row selection
  std::string lora_error_;                             // an adapted matrix that rows() split
};

}  // namespace

namespace {
bool kv_type_supported(gguf::GgmlType t) {
  return t == gguf::GgmlType::F32 || t == gguf::GgmlType::F16 || t == gguf::GgmlType::Q8_0;
}
Error kv_type_error(std::string_view name) {
  return make_error("KV cache type '" + std::string(name) + "' is not supported", "use f32, f16 or q8_0");
}
}  // namespace

Result<gguf::GgmlType> kv_type_from_name(std::string_view name) {
  auto t = gguf::type_from_name(name);
  if (!t || !kv_type_supported(*t)) return kv_type_error(name);
  return *t;
}

Result<BuiltModel> build(const gguf::File& file, const BuildOptions& opt) {
  if (!kv_type_supported(opt.kv_type)) return kv_type_error(gguf::traits(opt.kv_type).name);
  if (opt.kv_type != gguf::GgmlType::F32 && !opt.flash_attn)
    return make_error("a " + std::string(gguf::traits(opt.kv_type).name) + " KV cache needs flash attention (FLASH_ATTN_EXT)",
                      "drop --no-flash-attn, or keep the f32 KV cache");
  auto hp = read_hparams(file);
  if (!hp) return hp.error();
  if (opt.kv_type == gguf::GgmlType::Q8_0)
    for (int64_t il = 0; il < hp->n_layer; ++il)
      if (hp->dim(il) % 32 != 0)
        return make_error("a q8_0 KV cache needs head sizes that are multiples of 32; layer " + std::to_string(il) +
                              " has " + std::to_string(hp->dim(il)),
                          "use --kv-type f16 for this model");
  BuiltModel m;
  m.hp = std::move(*hp);
  Builder b(file, m.hp, opt, m.graph);
  if (auto s = b.run(); !s) return s.error();
  return m;
}

}  // namespace ggflow::builder
