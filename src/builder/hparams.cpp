// The architecture table and the metadata reader. To support another dense architecture, add
// its ArchTraits entry below and, if it has a new kind of block, a branch in transformer.cpp.
#include "builder/hparams.h"

#include <cmath>

namespace ggflow::builder {

namespace {

ArchTraits llama_traits() {
  ArchTraits t;
  t.name = "llama";
  return t;
}
ArchTraits qwen2_traits() {
  ArchTraits t;
  t.name = "qwen2";
  t.qkv_bias = true;
  t.rope_neox = true;
  return t;
}
ArchTraits gemma3_traits() {  // llama.cpp src/models/gemma3.cpp
  ArchTraits t;
  t.name = "gemma3";
  t.qk_norm = true;
  t.sandwich_norms = true;
  t.embed_scale = true;
  t.q_scale_in_graph = true;
  t.rope_neox = true;
  t.ffn_act = FfnAct::gelu_tanh;
  t.swa_pattern = 6;
  t.rope_base_swa = 10000.0f;
  return t;
}

const std::vector<ArchTraits>& table() {
  static const std::vector<ArchTraits> t{llama_traits(), qwen2_traits(), gemma3_traits()};
  return t;
}

template <class T>
Status need(const gguf::File& f, const std::string& key, T& out) {
  auto r = f.get<T>(key);
  if (!r) return make_error("model is missing required key '" + key + "': " + r.error().what,
                            "the file is incomplete or was converted for another architecture");
  out = *r;
  return {};
}
template <class T>
Status maybe(const gguf::File& f, const std::string& key, T& out) {
  if (!f.has(key)) return {};
  auto r = f.get<T>(key);
  if (!r) return make_error("metadata key '" + key + "' is malformed: " + r.error().what);
  out = *r;
  return {};
}

}  // namespace

const ArchTraits* find_arch(std::string_view name) {
  for (const auto& t : table())
    if (t.name == name) return &t;
  return nullptr;
}

std::string supported_archs() {
  std::string s;
  for (const auto& t : table()) s += (s.empty() ? "" : ", ") + t.name;
  return s;
}

Result<HParams> read_hparams(const gguf::File& f) {
  std::string arch(f.architecture());
  if (arch.empty()) return make_error("model is missing required key 'general.architecture'", "not a model file?");
  const ArchTraits* traits = find_arch(arch);
  if (!traits) return make_error("unsupported architecture '" + arch + "'", "ggflow builds " + supported_archs());
  HParams h;
  h.arch = *traits;
  const std::string p = arch + ".";
  uint32_t u = 0;
  float fl = 0;
#define NEED(key, dst) \
  if (auto s = need(f, p + key, u); !s) return s.error(); \
  dst = u;
  NEED("block_count", h.n_layer);
  NEED("embedding_length", h.n_embd);
  NEED("feed_forward_length", h.n_ff);
  NEED("attention.head_count", h.n_head);
#undef NEED
  if (auto s = need(f, p + "attention.layer_norm_rms_epsilon", fl); !s) return s.error();
  h.rms_eps = fl;
  h.n_head_kv = h.n_head;
  if (auto s = maybe(f, p + "attention.head_count_kv", u); !s) return s.error();
  else if (f.has(p + "attention.head_count_kv")) h.n_head_kv = u;
  if (h.n_layer <= 0 || h.n_embd <= 0 || h.n_head <= 0 || h.n_head_kv <= 0 || h.n_head % h.n_head_kv != 0)
    return make_error("bad hyper-parameters: " + std::to_string(h.n_layer) + " layers, " + std::to_string(h.n_head) +
                      " heads, " + std::to_string(h.n_head_kv) + " kv heads", "heads must be a multiple of kv heads");
  h.head_dim = h.n_embd / h.n_head;
  if (f.has(p + "attention.key_length")) {
    if (auto s = need(f, p + "attention.key_length", u); !s) return s.error();
    h.head_dim = u;
  }
  h.n_rot = h.head_dim;
  if (f.has(p + "rope.dimension_count")) {
    if (auto s = need(f, p + "rope.dimension_count", u); !s) return s.error();
    h.n_rot = u;
  }
  if (auto s = maybe(f, p + "context_length", u); !s) return s.error();
  else h.n_ctx_train = f.has(p + "context_length") ? u : 0;
  if (auto s = maybe(f, p + "rope.freq_base", h.rope_base); !s) return s.error();
  if (f.has(p + "rope.scaling.type")) {
    auto ty = f.get<std::string>(p + "rope.scaling.type");
    float factor = 1.0f;
    if (auto s = maybe(f, p + "rope.scaling.factor", factor); !s) return s.error();
    if (ty && *ty == "linear" && factor > 0) h.rope_scale = 1.0f / factor;
    else if (ty && *ty != "none") return make_error("rope scaling '" + *ty + "' is not supported", "ggflow supports linear RoPE scaling");
  }
  const gguf::TensorInfo* emb = f.find_tensor("token_embd.weight");
  if (!emb || emb->ne.size() != 2) return make_error("model is missing required tensor 'token_embd.weight'");
  h.n_vocab = static_cast<int64_t>(emb->ne[1]);
  h.swa_layers.assign(h.n_layer, false);
  if (traits->swa_pattern) {
    if (auto s = need(f, p + "attention.sliding_window", u); !s) return s.error();
    h.n_swa = u;
    int pattern = traits->swa_pattern;
    if (f.has(p + "attention.sliding_window_pattern")) {
      if (auto s = need(f, p + "attention.sliding_window_pattern", u); !s) return s.error();
      pattern = static_cast<int>(u);
    }
    // llama.cpp set_swa_pattern(n): layer il slides unless il % n == n - 1
    for (int64_t il = 0; il < h.n_layer; ++il) h.swa_layers[il] = pattern > 0 && (il % pattern) < pattern - 1;
  }
  if (traits->q_scale_in_graph) h.attn_scale = 1.0f / std::sqrt(static_cast<float>(h.head_dim));
  return h;
}

}  // namespace ggflow::builder
