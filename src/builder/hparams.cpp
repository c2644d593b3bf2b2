// The metadata reader: the common hyper-parameters, then each family's own keys (arch.cpp lists
// which family reads which).
#include "builder/hparams.h"

#include <algorithm>
#include <cmath>

namespace ggflow::builder {

namespace {

const std::string kBrokenFile = "the file is damaged or was written by a broken converter; re-download or re-convert it";

template <class T>
Status maybe(const gguf::File& f, const std::string& key, T& out) {
  if (!f.has(key)) return {};
  auto r = f.get<T>(key);  // "metadata key 'k' has type string, expected u32", or does not fit
  if (!r) return make_error(r.error().what, kBrokenFile);
  out = *r;
  return {};
}
template <class T>
Status need(const gguf::File& f, const std::string& key, T& out) {
  if (!f.has(key))
    return make_error("model is missing required key '" + key + "'",
                      "the file is incomplete or was converted for another architecture");
  return maybe(f, key, out);
}

std::string str(int64_t v) { return std::to_string(v); }

// The number of layers the file's tensors describe: 1 + the largest N of a "blk.N." tensor.
int64_t layers_in_tensors(const gguf::File& f) {
  int64_t n = 0;
  for (const auto& t : f.tensors()) {
    std::string_view name = t.name;
    if (name.substr(0, 4) != "blk.") continue;
    int64_t il = 0;
    size_t i = 4;
    for (; i < name.size() && i < 14 && name[i] >= '0' && name[i] <= '9'; ++i) il = il * 10 + (name[i] - '0');
    if (i > 4 && i < name.size() && name[i] == '.') n = std::max(n, il + 1);
  }
  return n;
}

// The vocabulary: token_embd's rows, checked against the tokenizer's token list, `{arch}.vocab_size`
// and the output head, so that no token id can read past a table and every logit has a token.
Status check_vocab(const gguf::File& f, const std::string& p, HParams& h) {
  const gguf::TensorInfo* emb = f.find_tensor("token_embd.weight");
  if (!emb) return make_error("model is missing required tensor 'token_embd.weight'", kBrokenFile);
  if (emb->ne.size() != 2 || emb->ne[1] == 0)
    return make_error("tensor 'token_embd.weight' has " + str(int64_t(emb->ne.size())) +
                          " dimensions or no rows; it must be [embedding_length, vocabulary] with at least one row",
                      kBrokenFile);
  h.n_vocab = static_cast<int64_t>(emb->ne[1]);
  if (const gguf::Value* v = f.find("tokenizer.ggml.tokens")) {
    if (v->type != gguf::ValueType::ARRAY || !v->arr || v->arr->elem != gguf::ValueType::STRING)
      return make_error("metadata key 'tokenizer.ggml.tokens' has type " + std::string(gguf::value_type_name(v->type)) +
                            (v->type == gguf::ValueType::ARRAY && v->arr
                                 ? " of " + std::string(gguf::value_type_name(v->arr->elem))
                                 : std::string()) +
                            ", expected an array of strings",
                        kBrokenFile);
    const int64_t n_tokens = static_cast<int64_t>(v->arr->size);
    if (n_tokens > h.n_vocab)
      return make_error("tensor 'token_embd.weight' has " + str(h.n_vocab) + " rows, fewer than the " + str(n_tokens) +
                            " tokens of the vocabulary (tokenizer.ggml.tokens): token ids " + str(h.n_vocab) + ".." +
                            str(n_tokens - 1) + " would have no embedding",
                        "the embedding and the tokenizer come from different models; " + kBrokenFile);
    if (n_tokens < h.n_vocab)
      return make_error("the vocabulary (tokenizer.ggml.tokens) has " + str(n_tokens) + " tokens but tensor 'token_embd.weight' has " +
                            str(h.n_vocab) + " rows; they must be equal (ids " + str(n_tokens) + ".." + str(h.n_vocab - 1) +
                            " could be generated but not detokenized)",
                        "the embedding and the tokenizer come from different models; " + kBrokenFile);
  }
  int64_t vs = 0;
  if (auto s = maybe(f, p + "vocab_size", vs); !s) return s.error();
  if (f.has(p + "vocab_size") && vs != h.n_vocab)
    return make_error("metadata key '" + p + "vocab_size' = " + str(vs) + " but tensor 'token_embd.weight' has " + str(h.n_vocab) +
                          " rows; they must be equal",
                      kBrokenFile);
  if (const gguf::TensorInfo* out = f.find_tensor("output.weight"); out && out->ne.size() == 2 && int64_t(out->ne[1]) != h.n_vocab)
    return make_error("tensor 'output.weight' (the output head) has " + str(int64_t(out->ne[1])) +
                          " rows, one logit per token, but the vocabulary has " + str(h.n_vocab) + " tokens (the rows of 'token_embd.weight')",
                      kBrokenFile);
  return {};
}

// A rotary width (`key`, when the file has it) into `out`: even, at least 2, at most the head size.
Status read_rot(const gguf::File& f, const std::string& key, int64_t head_dim, int64_t& out) {
  if (!f.has(key)) return {};
  uint32_t u = 0;
  if (auto s = need(f, key, u); !s) return s.error();
  out = u;
  if (out <= 0 || out > head_dim || out % 2 != 0)
    return make_error("metadata key '" + key + "' = " + str(out) +
                          ": RoPE rotates an even number of dimensions, at least 2 and at most the head size " + str(head_dim),
                      kBrokenFile);
  return {};
}

// A width or count that is one number, or (as llama.cpp's get_key_or_arr reads feed_forward_length,
// head_count and head_count_kv) an array of one per layer; every value at least 1.
Status read_per_layer(const gguf::File& f, const std::string& key, int64_t n_layer, std::vector<int64_t>& out) {
  const gguf::Value* v = f.find(key);
  if (!v) return make_error("model is missing required key '" + key + "'", "the file is incomplete or was converted for another architecture");
  const bool array = v->type == gguf::ValueType::ARRAY;
  if (!array) {
    uint32_t u = 0;
    if (auto s = need(f, key, u); !s) return s.error();
    out.assign(n_layer, u);
  } else {
    const bool one_per_layer = v->arr && static_cast<int64_t>(v->arr->size) == n_layer;
    auto values = f.get<std::vector<int64_t>>(key);  // integers of any width; an error for other elements
    if (!one_per_layer || !values)
      return make_error("metadata key '" + key + "' must be an integer or an array of " + str(n_layer) +
                            " integers (one per layer), got " + v->to_string(4),
                        kBrokenFile);
    out = std::move(*values);
  }
  for (int64_t il = 0; il < n_layer; ++il)
    if (out[il] <= 0 || out[il] > UINT32_MAX)
      return make_error("metadata key '" + key + "' = " + str(out[il]) + (array ? " at layer " + str(il) : "") +
                            ": widths and head counts must be at least 1 (and fit 32 bits)",
                        kBrokenFile);
  return {};
}

// All keys the architecture reads, for the error on an unknown one.
std::string known_keys(const ArchTraits& t) {
  std::string s;
  for (const auto& k : common_keys()) s += (s.empty() ? "" : ", ") + k;
  for (const auto& k : t.keys) s += ", " + k;
  return s;
}

// rope.scaling.*: linear (and phi3's longrope, whose factors are tensors) scale positions by
// 1/factor; original_context_length chooses phi3's long or short factors; attn_factor multiplies
// cos and sin.
Status read_rope_scaling(const gguf::File& f, const std::string& p, const ArchTraits& arch, HParams& h) {
  h.n_ctx_orig = h.n_ctx_train;
  if (f.has(p + "rope.scaling.original_context_length")) {
    uint32_t u = 0;
    if (auto s = need(f, p + "rope.scaling.original_context_length", u); !s) return s.error();
    h.n_ctx_orig = u;
  }
  if (auto s = maybe(f, p + "rope.scaling.attn_factor", h.rope_attn_factor); !s) return s.error();
  if (!std::isfinite(h.rope_attn_factor) || h.rope_attn_factor <= 0)
    return make_error("metadata key '" + p + "rope.scaling.attn_factor' = " + std::to_string(h.rope_attn_factor) +
                          ": the RoPE attention factor must be a finite number > 0",
                      kBrokenFile);
  if (!f.has(p + "rope.scaling.type")) return {};
  const std::string key = p + "rope.scaling.type";
  std::string ty;
  if (auto s = need(f, key, ty); !s) return s.error();
  float factor = 0.0f;
  if (auto s = maybe(f, p + "rope.scaling.factor", factor); !s) return s.error();
  const bool longrope_ok = ty == "longrope" && arch.rope_long_short;
  if (ty == "linear" || longrope_ok) {
    if (!std::isfinite(factor) || factor < 0)
      return make_error("metadata key '" + p + "rope.scaling.factor' = " + std::to_string(factor) +
                            ": the RoPE scaling factor must be a finite number >= 0 (0: no scaling)",
                        kBrokenFile);
    if (factor > 0) h.rope_scale = 1.0f / factor;
  } else if (ty == "yarn" || ty == "longrope") {
    return make_error("RoPE scaling '" + ty + "' (metadata key '" + key + "') is not supported for architecture '" + arch.name + "'",
                      "ggflow supports the RoPE scaling types none and linear (and longrope for phi3)");
  } else if (ty != "none") {
    return make_error("unknown RoPE scaling type '" + ty + "' (metadata key '" + key + "')",
                      "GGUF defines none, linear, yarn and longrope; ggflow supports none and linear (and longrope for phi3)");
  }
  return {};
}

// gemma4's attention.sliding_window_pattern: an array of block_count bools (true: the layer slides).
Status read_layer_list(const gguf::File& f, const std::string& key, HParams& h) {
  const gguf::Value* v = f.find(key);
  if (!v) return make_error("model is missing required key '" + key + "'", "the file is incomplete or was converted for another architecture");
  if (v->type != gguf::ValueType::ARRAY || !v->arr || v->arr->elem != gguf::ValueType::BOOL ||
      static_cast<int64_t>(v->arr->size) != h.n_layer)
    return make_error("metadata key '" + key + "' must be an array of " + std::to_string(h.n_layer) +
                          " bools (one per layer), got " + v->to_string(4),
                      kBrokenFile);
  for (int64_t il = 0; il < h.n_layer; ++il) h.swa_layers[il] = v->arr->raw[il] != 0;
  return {};
}

// Which layers slide and over how many tokens (ArchTraits::swa), and their RoPE base.
Status read_sliding_window(const gguf::File& f, const std::string& p, const ArchTraits& arch, HParams& h) {
  h.swa_layers.assign(h.n_layer, false);
  if (arch.swa == SwaKind::none) return {};
  const std::string key = p + "attention.sliding_window";
  uint32_t u = 0;
  h.n_swa = arch.swa_default;  // gemma2: 4096 without the key; gemma3 needs it; mistral: no key, no window
  if (f.has(key) || ((arch.swa == SwaKind::pattern || arch.swa == SwaKind::listed) && arch.swa_default == 0)) {
    if (auto s = need(f, key, u); !s) return s.error();
    h.n_swa = u;
  }
  if (arch.swa != SwaKind::all && h.n_swa <= 0)  // mistral: 0 or no key means full attention
    return make_error("metadata key '" + key + "' = " + std::to_string(h.n_swa) +
                          ": the sliding window must hold at least one token",
                      kBrokenFile);
  if (arch.swa == SwaKind::all) {
    for (int64_t il = 0; il < h.n_layer; ++il) h.swa_layers[il] = h.n_swa > 0;
  } else if (arch.swa == SwaKind::listed) {  // gemma4: one bool per layer
    if (auto s = read_layer_list(f, p + "attention.sliding_window_pattern", h); !s) return s.error();
  } else {
    int pattern = arch.swa_pattern;
    if (f.has(p + "attention.sliding_window_pattern")) {
      if (auto s = need(f, p + "attention.sliding_window_pattern", u); !s) return s.error();
      pattern = static_cast<int>(u);
    }
    // llama.cpp set_swa_pattern(n): layer il slides unless il % n == n - 1
    for (int64_t il = 0; il < h.n_layer; ++il) h.swa_layers[il] = pattern > 0 && (il % pattern) < pattern - 1;
  }
  h.rope_base_swa = arch.rope_base_swa > 0 ? arch.rope_base_swa : h.rope_base;
  h.rope_scale_swa = arch.rope_base_swa > 0 ? 1.0f : h.rope_scale;  // gemma3's local layers: unscaled
  if (auto s = maybe(f, p + "rope.freq_base_swa", h.rope_base_swa); !s) return s.error();
  if (!std::isfinite(h.rope_base_swa) || h.rope_base_swa <= 0)
    return make_error("metadata key '" + p + "rope.freq_base_swa' = " + std::to_string(h.rope_base_swa) +
                          ": the RoPE base frequency must be a finite number > 0",
                      kBrokenFile);
  return {};
}

// gemma4: the per-layer input width, the sliding layers' head size and rotary width, and the layers
// that read an earlier layer's KV cache instead of their own (attention.shared_kv_layers: the last
// ones; each reads the last sliding or full layer with a cache, as llama.cpp's reuse rule).
Status read_gemma4_keys(const gguf::File& f, const std::string& p, HParams& h) {
  uint32_t u = 0;
  if (auto s = need(f, p + "embedding_length_per_layer_input", u); !s) return s.error();
  h.n_embd_per_layer = u;
  if (h.n_embd_per_layer <= 0)
    return make_error("metadata key '" + p + "embedding_length_per_layer_input' = 0: the per-layer inputs need a width", kBrokenFile);
  if (auto s = need(f, p + "attention.key_length_swa", u); !s) return s.error();
  h.head_dim_swa = u;
  if (h.head_dim_swa <= 0)
    return make_error("metadata key '" + p + "attention.key_length_swa' = 0: the head size must be at least 1", kBrokenFile);
  if (auto s = need(f, p + "attention.value_length_swa", u); !s) return s.error();
  if (u != h.head_dim_swa)
    return make_error("metadata key '" + p + "attention.value_length_swa' = " + std::to_string(u) + " differs from '" + p +
                          "attention.key_length_swa' = " + str(h.head_dim_swa),
                      "Gemma 4 has equal key and value head sizes (llama.cpp refuses the file too); " + kBrokenFile);
  if (auto s = read_rot(f, p + "rope.dimension_count_swa", h.head_dim_swa, h.n_rot_swa); !s) return s.error();
  if (h.n_rot_swa > h.head_dim_swa)
    return make_error("the sliding layers rotate " + str(h.n_rot_swa) + " dimensions (the full layers' " + p +
                          "rope.dimension_count) but their heads have " + str(h.head_dim_swa) + " ('" + p + "attention.key_length_swa')",
                      "the file needs '" + p + "rope.dimension_count_swa'; " + kBrokenFile);
  if (!f.has(p + "attention.shared_kv_layers")) return {};
  if (auto s = need(f, p + "attention.shared_kv_layers", u); !s) return s.error();
  if (u == 0) return {};
  h.n_layer_kv = h.n_layer - static_cast<int64_t>(u);
  if (h.n_layer_kv < 2)
    return make_error("metadata key '" + p + "attention.shared_kv_layers' = " + std::to_string(u) + " leaves " + str(h.n_layer_kv) +
                          " of " + str(h.n_layer) + " layers with their own KV cache; shared layers read the last sliding and the last "
                          "full one of at least 2",
                      kBrokenFile);
  for (int64_t il = h.n_layer_kv; il < h.n_layer; ++il) {
    const int64_t j = h.kv_source(il);
    if (h.swa_layers[j] != h.swa_layers[il] || h.kv_heads(j) != h.kv_heads(il))
      return make_error("layer " + str(il) + " shares layer " + str(j) + "'s KV cache (" + p + "attention.shared_kv_layers = " +
                            std::to_string(u) + ") but " +
                            (h.swa_layers[j] != h.swa_layers[il]
                                 ? std::string(h.swa_layers[il] ? "slides while layer " + str(j) + " does not"
                                                                : "does not slide while layer " + str(j) + " does")
                                 : "has " + str(h.kv_heads(il)) + " KV heads, layer " + str(j) + " " + str(h.kv_heads(j))),
                        "the last two layers with a cache must be one sliding and one full layer, as llama.cpp's reuse rule reads "
                        "them; " + kBrokenFile);
  }
  return {};
}

// A soft-cap (cap·tanh(x / cap)): the key's value, or `dflt` without it; 0 switches it off.
Status read_softcap(const gguf::File& f, const std::string& key, float dflt, float& out) {
  out = dflt;
  if (auto s = maybe(f, key, out); !s) return s.error();
  if (!std::isfinite(out) || out < 0)
    return make_error("metadata key '" + key + "' = " + std::to_string(out) + ": a soft-cap must be a finite number >= 0 (0: off)",
                      kBrokenFile);
  return {};
}

}  // namespace

int64_t HParams::kv_elems_per_token() const {
  int64_t n = 0;
  for (int64_t il = 0; il < n_layer_kv; ++il) n += 2 * kv_heads(il) * dim(il);
  return n;
}

Result<HParams> read_hparams(const gguf::File& f) {
  const gguf::Value* av = f.find("general.architecture");
  if (!av) return make_error("model is missing required key 'general.architecture'", "not a model file? ggflow builds " + supported_archs());
  if (av->type != gguf::ValueType::STRING)
    return make_error("metadata key 'general.architecture' has type " + std::string(gguf::value_type_name(av->type)) +
                          ", expected string",
                      kBrokenFile);
  std::string arch(av->s);
  const ArchTraits* traits = find_arch(arch);
  if (!traits)
    return make_error("unsupported architecture '" + arch + "' (general.architecture); supported: " + supported_archs(),
                      "ggflow builds " + supported_archs());
  HParams h;
  h.arch = *traits;
  const std::string p = arch + ".";
  if (std::string k = unknown_key(f, *traits); !k.empty())
    return make_error("metadata key '" + k + "' is not one ggflow reads for architecture '" + arch +
                          "': it may change the model (experts, YaRN, ALiBi, ...), so the file is refused rather than run wrong",
                      "ggflow reads " + p + "{" + known_keys(*traits) + "}; remove the key if it does not change the model");
  uint32_t u = 0;
  // A count that must be at least 1, with the key named when it is not.
  auto positive = [&](const std::string& key, int64_t v, const std::string& why) -> Status {
    if (v > 0) return {};
    return make_error("metadata key '" + p + key + "' = " + str(v) + ": " + why, kBrokenFile);
  };
#define NEED(key, dst) \
  if (auto s = need(f, p + key, u); !s) return s.error(); \
  dst = u;
  NEED("block_count", h.n_layer);
  NEED("embedding_length", h.n_embd);
#undef NEED
  if (auto s = positive("block_count", h.n_layer, "a model needs at least one layer"); !s) return s.error();
  if (auto s = positive("embedding_length", h.n_embd, "the embedding width must be at least 1"); !s) return s.error();
  // before anything is sized by the layer count: a block_count of 4e9 must not allocate per layer
  const int64_t file_layers = layers_in_tensors(f);
  if (file_layers != h.n_layer)
    return make_error("metadata key '" + p + "block_count' = " + str(h.n_layer) + " but the file's tensors describe " +
                          str(file_layers) + " layers (blk.0 .. blk." + str(file_layers - 1) + ")",
                      "the layer count and the tensors must agree; " + kBrokenFile);
  if (h.n_layer > static_cast<int64_t>(f.tensors().size()))
    return make_error("metadata key '" + p + "block_count' = " + str(h.n_layer) + " but the file has only " +
                          str(static_cast<int64_t>(f.tensors().size())) + " tensors; every layer has several",
                      "the layer count and the tensors must agree; " + kBrokenFile);
  if (auto s = read_per_layer(f, p + "feed_forward_length", h.n_layer, h.ff_l); !s) return s.error();
  if (auto s = read_per_layer(f, p + "attention.head_count", h.n_layer, h.heads_l); !s) return s.error();
  h.n_ff = h.ff_l[0], h.n_head = h.heads_l[0];
  h.n_layer_kv = h.n_layer;

  if (auto s = need(f, p + "attention.layer_norm_rms_epsilon", h.rms_eps); !s) return s.error();
  if (!std::isfinite(h.rms_eps) || h.rms_eps < 0)
    return make_error("metadata key '" + p + "attention.layer_norm_rms_epsilon' = " + std::to_string(h.rms_eps) +
                          ": the RMS-norm epsilon must be a finite number >= 0",
                      kBrokenFile);
  h.kv_heads_l = h.heads_l;
  if (f.has(p + "attention.head_count_kv"))
    if (auto s = read_per_layer(f, p + "attention.head_count_kv", h.n_layer, h.kv_heads_l); !s) return s.error();
  h.n_head_kv = h.kv_heads_l[0];
  for (int64_t il = 0; il < h.n_layer; ++il)
    if (h.heads(il) % h.kv_heads(il) != 0)
      return make_error("metadata key '" + p + "attention.head_count' = " + str(h.heads(il)) + " is not a multiple of '" + p +
                            "attention.head_count_kv' = " + str(h.kv_heads(il)) + (h.n_layer > 1 ? " (layer " + str(il) + ")" : ""),
                        "grouped-query attention shares each key/value head among head_count / head_count_kv query heads; " +
                            kBrokenFile);
  if (f.has(p + "attention.key_length")) {
    if (auto s = need(f, p + "attention.key_length", u); !s) return s.error();
    h.head_dim = u;
    if (auto s = positive("attention.key_length", h.head_dim, "the head size must be at least 1"); !s) return s.error();
  } else {
    if (h.n_embd % h.n_head != 0)
      return make_error("metadata key '" + p + "embedding_length' = " + str(h.n_embd) + " is not divisible by '" + p +
                            "attention.head_count' = " + str(h.n_head) + ", so the head size is not whole",
                        "the file needs '" + p + "attention.key_length' or consistent sizes; " + kBrokenFile);
    h.head_dim = h.n_embd / h.n_head;
  }
  if (f.has(p + "attention.value_length")) {
    int64_t vl = 0;
    if (auto s = need(f, p + "attention.value_length", vl); !s) return s.error();
    if (vl != h.head_dim)
      return make_error("metadata key '" + p + "attention.value_length' = " + str(vl) + " differs from the key head size " +
                            str(h.head_dim),
                        "ggflow's attention needs equal key and value head sizes");
  }
  h.n_rot = h.head_dim;
  if (auto s = read_rot(f, p + "rope.dimension_count", h.head_dim, h.n_rot); !s) return s.error();
  h.head_dim_swa = h.head_dim, h.n_rot_swa = h.n_rot;  // gemma4's own keys may change them
  if (f.has(p + "context_length")) {
    if (auto s = need(f, p + "context_length", u); !s) return s.error();
    h.n_ctx_train = u;
    if (auto s = positive("context_length", h.n_ctx_train, "the training context must be at least 1 token"); !s) return s.error();
  }
  if (auto s = maybe(f, p + "rope.freq_base", h.rope_base); !s) return s.error();
  if (!std::isfinite(h.rope_base) || h.rope_base <= 0)
    return make_error("metadata key '" + p + "rope.freq_base' = " + std::to_string(h.rope_base) +
                          ": the RoPE base frequency must be a finite number > 0",
                      kBrokenFile);
  if (auto s = read_rope_scaling(f, p, *traits, h); !s) return s.error();
  if (auto s = check_vocab(f, p, h); !s) return s.error();
  if (auto s = read_sliding_window(f, p, *traits, h); !s) return s.error();
  if (traits->per_layer_embd)
    if (auto s = read_gemma4_keys(f, p, h); !s) return s.error();
  if (traits->softcap) {
    if (auto s = read_softcap(f, p + "attn_logit_softcapping", 50.0f, h.attn_softcap); !s) return s.error();
    if (auto s = read_softcap(f, p + "final_logit_softcapping", 30.0f, h.final_softcap); !s) return s.error();
  } else if (f.has(p + "final_logit_softcapping")) {  // gemma3 files may carry it (llama.cpp applies it)
    if (auto s = read_softcap(f, p + "final_logit_softcapping", 0.0f, h.final_softcap); !s) return s.error();
  }
  // gemma2 27B scales Q by (n_embd / n_head)^-0.5 (llama.cpp, after gemma_pytorch), the others by D^-0.5
  if (traits->q_scale_in_graph)
    h.attn_scale = 1.0f / std::sqrt(traits->name == "gemma2" && h.n_layer == 46 ? static_cast<float>(h.n_embd / h.n_head)
                                                                                 : static_cast<float>(h.head_dim));
  return h;
}

}  // namespace ggflow::builder
