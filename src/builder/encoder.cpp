// The BERT encoder (architecture "bert": all-MiniLM, bge, e5 as llama.cpp converts them), as
// llama.cpp's graph computes it (attention as one FLASH_ATTN_EXT, which llama.cpp's embedding tool
// computes unfused as softmax then a product: the same values up to summation order):
//
//   x = token_embd[ids] + token_types[0] + position_embd[pos];  x = LN(x) (token_embd_norm)
//   per layer:  q, k, v = Wq·x + bq, Wk·x + bk, Wv·x + bv            [E, T] each, H heads of D
//               a = softmax(k^T q · 1/sqrt(D) + mask) (no causal mask: every token of a sequence
//               sees all of its sequence; mask is the input inp_kq_mask [T keys, T queries], 0
//               or -inf: several sequences packed into one run see only themselves)
//               x = LN(Wo·(v a) + bo + x)  (attn_output_norm)
//               x = LN(Wd·gelu(Wu·x + bu) + bd + x)  (layer_output_norm)
//   output "embd": x, f32 [E, T]; pooling (mean, CLS, last) and normalization are the runner's.
//   A reranker (bert.pooling_type 4, rank; llama.cpp's build_pooling RANK case, a BERT / RoBERTa
//   cross-encoder's head): input inp_cls i32 [S], each sequence's first token (its [CLS]) in the
//   packed run, and
//     c = x[inp_cls]                                                  [E, S]
//     c = tanh(cls.weight · c + cls.bias)          (when the file has cls.weight)
//     c = cls.output.weight · c + cls.output.bias  (when it has cls.output.weight)   [n_cls_out, S]
//   output "score": c. The file must have one of the two layers.
//
// LN(x) = norm(x) * w + b with the file's layer_norm_epsilon; GELU is GGML's tanh form.
#include "builder/build.h"

#include <cmath>
#include <set>

#include "gguf/dequant.h"

namespace ggflow::builder {

using frontend::Ext;
using frontend::GgmlGraph;
using frontend::GgmlType;
using frontend::Ne;

namespace {

Result<int64_t> u32_key(const gguf::File& f, const std::string& key) {
  auto v = f.get<uint32_t>(key);
  if (!v) return make_error("metadata key '" + key + "' is missing or not an integer", "the file is not a complete BERT model; re-convert it");
  return static_cast<int64_t>(*v);
}

class EncoderBuilder {
 public:
  EncoderBuilder(const gguf::File& f, const EncoderParams& p, GgmlGraph& g) : f_(f), p_(p), g_(g) {}

  // A weight of the file with the shape the architecture expects (GGML order); 1-D ones in F32.
  Result<int> weight(const std::string& name, Ne want, int n_dims) {
    const gguf::TensorInfo* t = f_.find_tensor(name);
    if (!t) return make_error("model is missing required tensor '" + name + "'", "the file does not fit architecture 'bert'; re-convert it");
    bool ok = static_cast<int>(t->ne.size()) == n_dims;
    for (int i = 0; ok && i < n_dims; ++i) ok = static_cast<int64_t>(t->ne[i]) == want[i].n;
    if (!ok) return make_error("tensor '" + name + "' does not have the shape the hyper-parameters give", "the file is damaged; re-convert it");
    if (n_dims == 1 && t->type != GgmlType::F32)
      return make_error("tensor '" + name + "' is not F32; norm weights and biases must be", "re-convert the file");
    if (n_dims == 2 && !gguf::can_dequantize(t->type))
      return make_error("tensor '" + name + "' has a type ggflow cannot compute with", "re-quantize the model to F16, Q8_0 or another GGML type");
    used_.insert(name);
    return g_.weight(*t, f_.tensor_data(*t));
  }

  // norm(x) * w + b with the weights `name`.weight / `name`.bias.
  Result<int> layer_norm(int x, const std::string& name) {
    auto w = weight(name + ".weight", {Ext(p_.n_embd)}, 1);
    if (!w) return w.error();
    auto b = weight(name + ".bias", {Ext(p_.n_embd)}, 1);
    if (!b) return b.error();
    return g_.add(g_.mul(g_.norm(x, p_.norm_eps), *w), *b);
  }

  // W·x + b for the weights `name`.weight [in, out] / `name`.bias [out].
  Result<int> linear(int x, const std::string& name, int64_t in, int64_t out) {
    auto w = weight(name + ".weight", {Ext(in), Ext(out)}, 2);
    if (!w) return w.error();
    auto b = weight(name + ".bias", {Ext(out)}, 1);
    if (!b) return b.error();
    return g_.add(g_.mul_mat(*w, x), *b);
  }

  Status run() {
    const int64_t E = p_.n_embd, H = p_.n_head, D = E / H, F = p_.n_ff;
    const Ext T = g_.symbol("T");
    g_.keep_alive(f_.bytes());
    int tokens = g_.input("inp_tokens", GgmlType::I32, {T, 1, 1, 1});
    int pos = g_.input("inp_pos", GgmlType::I32, {T, 1, 1, 1});
    int mask = g_.input("inp_kq_mask", GgmlType::F32, {T, T, 1, 1});  // [T keys, T queries]

    auto tok = weight("token_embd.weight", {Ext(E), Ext(p_.n_vocab)}, 2);
    if (!tok) return tok.error();
    auto types = weight("token_types.weight", {Ext(E), Ext(p_.n_token_types)}, 2);
    if (!types) return types.error();
    auto posw = weight("position_embd.weight", {Ext(E), Ext(p_.n_ctx_train)}, 2);
    if (!posw) return posw.error();
    const auto& tt = g_.tensor(*types);
    int type0 = g_.view(*types, {Ext(E), Ext(1), Ext(1), Ext(1)}, {int64_t(gguf::traits(tt.type).type_size), 0, 0, 0}, 0);
    int x = g_.add(g_.add(g_.get_rows(*tok, tokens), type0), g_.get_rows(*posw, pos));  // f32 [E, T]
    auto n0 = layer_norm(x, "token_embd_norm");
    if (!n0) return n0.error();
    x = *n0;
    const float kq_scale = 1.0f / std::sqrt(static_cast<float>(D));
    for (int64_t il = 0; il < p_.n_layer; ++il) {
      const std::string b = "blk." + std::to_string(il) + ".";
      auto q = linear(x, b + "attn_q", E, E), k = linear(x, b + "attn_k", E, E), v = linear(x, b + "attn_v", E, E);
      if (!q) return q.error();
      if (!k) return k.error();
      if (!v) return v.error();
      int Q = g_.permute(g_.reshape(*q, {Ext(D), Ext(H), T, Ext(1)}), 0, 2, 1, 3);  // [D, T, H]
      int K = g_.permute(g_.reshape(*k, {Ext(D), Ext(H), T, Ext(1)}), 0, 2, 1, 3);  // [D, T, H]
      int V = g_.permute(g_.reshape(*v, {Ext(D), Ext(H), T, Ext(1)}), 0, 2, 1, 3);  // [D, T, H]
      int o = g_.flash_attn_ext(Q, K, V, mask, kq_scale);                           // [D, H, T]
      o = g_.reshape(o, {Ext(E), T, Ext(1), Ext(1)});                                // [E, T]
      auto ao = linear(o, b + "attn_output", E, E);
      if (!ao) return ao.error();
      auto n1 = layer_norm(g_.add(*ao, x), b + "attn_output_norm");
      if (!n1) return n1.error();
      auto up = linear(*n1, b + "ffn_up", E, F);
      if (!up) return up.error();
      auto down = linear(g_.unary(frontend::GgmlUnary::GELU, *up), b + "ffn_down", F, E);
      if (!down) return down.error();
      auto n2 = layer_norm(g_.add(*down, *n1), b + "layer_output_norm");
      if (!n2) return n2.error();
      x = *n2;
    }
    g_.set_name(x, "result_embd");
    if (p_.pooling == Pooling::rank)
      if (auto s = rank_head(x); !s) return s;
    for (const auto& t : f_.tensors())
      if (!used_.count(std::string(t.name)))
        return make_error("tensor '" + std::string(t.name) + "' is in the file but architecture 'bert' does not use it",
                          "the file was converted for another architecture; ggflow serves BERT encoders as llama.cpp lays them out");
    g_.add_output("embd", x);
    return g_.status();
  }

  // The reranker's classification head (see the top): output "score" f32 [n_cls_out, S].
  Status rank_head(int x) {
    const int64_t E = p_.n_embd;
    int cls_rows = g_.input("inp_cls", GgmlType::I32, {g_.symbol("S"), Ext(1), Ext(1), Ext(1)});
    int c = g_.get_rows(x, cls_rows);  // [E, S]
    const bool dense = f_.find_tensor("cls.weight") != nullptr, out = f_.find_tensor("cls.output.weight") != nullptr;
    if (!dense && !out)
      return make_error("bert.pooling_type is 4 (rank) but the file has no classification head (cls.weight or cls.output.weight)",
                        "a reranker GGUF carries its head; convert the cross-encoder with llama.cpp's convert_hf_to_gguf.py");
    if (dense) {
      auto d = linear(c, "cls", E, E);
      if (!d) return d.error();
      c = g_.unary(frontend::GgmlUnary::TANH, *d);
    }
    if (out) {
      auto o = linear(c, "cls.output", E, p_.n_cls_out);
      if (!o) return o.error();
      c = *o;
    }
    g_.add_output("score", c);
    return {};
  }

 private:
  const gguf::File& f_;
  const EncoderParams& p_;
  GgmlGraph& g_;
  std::set<std::string> used_;
};

}  // namespace

bool is_encoder(const gguf::File& file) {
  auto arch = file.get<std::string>("general.architecture");
  return arch && *arch == "bert";
}

Result<BuiltEncoder> build_encoder(const gguf::File& file) {
  if (!is_encoder(file)) return make_error("the file is not an encoder model (general.architecture 'bert')", "give an embedding model such as all-MiniLM");
  BuiltEncoder m;
  EncoderParams& p = m.params;
  for (auto [key, out] : {std::pair<const char*, int64_t*>{"bert.embedding_length", &p.n_embd}, {"bert.block_count", &p.n_layer},
                          {"bert.attention.head_count", &p.n_head}, {"bert.feed_forward_length", &p.n_ff},
                          {"bert.context_length", &p.n_ctx_train}}) {
    auto v = u32_key(file, key);
    if (!v) return v.error();
    *out = *v;
  }
  if (auto eps = file.get<float>("bert.attention.layer_norm_epsilon")) p.norm_eps = *eps;
  if (auto pool = file.get<uint32_t>("bert.pooling_type")) p.pooling = static_cast<Pooling>(*pool);
  if (p.n_head <= 0 || p.n_embd % p.n_head != 0)
    return make_error("bert.embedding_length " + std::to_string(p.n_embd) + " is not a multiple of the head count " + std::to_string(p.n_head),
                      "the file's metadata is damaged; re-convert it");
  if (p.pooling != Pooling::mean && p.pooling != Pooling::cls && p.pooling != Pooling::last && p.pooling != Pooling::rank)
    return make_error("bert.pooling_type " + std::to_string(static_cast<int>(p.pooling)) + " is not supported",
                      "ggflow pools embeddings by mean (1), CLS (2) or last token (3), and ranks (4: a reranker)");
  if (p.pooling == Pooling::rank) {
    const gguf::TensorInfo* out = file.find_tensor("cls.output.weight");
    p.n_cls_out = out && out->ne.size() == 2 ? static_cast<int64_t>(out->ne[1]) : p.n_embd;
  }
  const gguf::TensorInfo* tok = file.find_tensor("token_embd.weight");
  const gguf::TensorInfo* types = file.find_tensor("token_types.weight");
  if (!tok || tok->ne.size() != 2 || !types || types->ne.size() != 2)
    return make_error("model is missing its token or token-type embeddings", "the file does not fit architecture 'bert'; re-convert it");
  p.n_vocab = static_cast<int64_t>(tok->ne[1]);
  p.n_token_types = static_cast<int64_t>(types->ne[1]);
  EncoderBuilder b(file, p, m.graph);
  if (auto s = b.run(); !s) return s.error();
  return m;
}

}  // namespace ggflow::builder
