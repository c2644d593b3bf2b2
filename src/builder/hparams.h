// Hyper-parameters of a dense transformer, read from GGUF metadata, and the per-architecture
// differences of the generic builder (arch.cpp holds one entry per supported architecture).
//
// Everything the graph depends on is read here, once, with an error naming the key that is
// missing or malformed; the builder itself never reads metadata.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/file.h"
#include "base/result.h"

namespace ggflow::builder {

enum class FfnAct : uint8_t { silu, gelu_tanh };

// Which layers attend through a sliding window (the key `{arch}.attention.sliding_window`).
enum class SwaKind : uint8_t {
  none,      // no layer (the key, if present, is not read: phi3, as llama.cpp)
  pattern,   // gemma2/gemma3: layer il slides unless il % pattern == pattern - 1
  all,       // llama (mistral): every layer slides when the file sets a window
  listed,    // gemma4: attention.sliding_window_pattern is an array of one bool per layer
};

// What distinguishes one dense-transformer architecture from another (arch.cpp: the table).
struct ArchTraits {
  std::string name;              // general.architecture
  std::string models;            // the model families that ship as this architecture (README table)
  std::string tested;            // the weight types its conformance tests run (README table)
  bool qkv_bias = false;         // qwen2: attn_q/k/v.bias
  bool qk_norm = false;          // qwen3, gemma3: RMS norms on each head of Q and K
  bool sandwich_norms = false;   // gemma2/3: post_attention_norm and post_ffw_norm
  bool embed_scale = false;      // gemma2/3: embeddings times sqrt(n_embd)
  bool q_scale_in_graph = false; // gemma2/3, phi3: Q *= attn_scale, attention scale 1
  bool rope_neox = false;        // qwen2/3, gemma2/3, phi3: rotate pairs (i, i + n_rot/2)
  bool fused_qkv = false;        // phi3: attn_qkv.weight [E, H·D + 2·Hkv·D] instead of attn_q/k/v
  bool fused_gate_up = false;    // phi3: ffn_up.weight [E, 2F] = gate rows then up rows, no ffn_gate
  bool rope_freqs = false;       // llama: rope_freqs.weight [n_rot/2] (Llama 3 frequency scaling)
  bool rope_long_short = false;  // phi3: rope_factors_long/short.weight [n_rot/2] (LongRoPE)
  bool softcap = false;          // gemma2: attention and final logits soft-capped (cap·tanh(x/cap))
  bool v_norm = false;           // gemma4: RMS norm (no weight) on each head of V
  bool unit_attn_scale = false;  // gemma4: attention scale 1 (Q and K are normed instead)
  bool rope_freqs_global = false;// gemma4: rope_freqs.weight on the full-attention layers only
  bool per_layer_embd = false;   // gemma4: per-layer token embeddings (a second token table)
  bool layer_out_scale = false;  // gemma4: optional blk.N.layer_output_scale.weight [1]
  bool optional_v = false;       // gemma4: a layer without attn_v.weight takes its K projection as V
  FfnAct ffn_act = FfnAct::silu;
  SwaKind swa = SwaKind::none;
  int swa_pattern = 0;           // SwaKind::pattern: gemma3 6, gemma2 2 (the file may override)
  int64_t swa_default = 0;       // window when the file has no key (gemma2: 4096); 0: key required
  float rope_base_swa = 0.0f;    // sliding layers' RoPE base (gemma3: 10000); 0: the global base
  std::vector<std::string> keys; // `{arch}.` keys read beyond the common ones (others are refused)
};

// The supported architectures; nullptr (and the list in `supported`) for any other.
const ArchTraits* find_arch(std::string_view name);
const std::vector<ArchTraits>& arch_table();
std::string supported_archs();   // "llama, qwen2, ..."
// The table of supported architectures as Markdown (the README's, printed by `ggflow inspect
// --architectures`), and the weight types every one of them computes with.
std::string architectures_markdown();
std::string weight_types();
// The `{arch}.` keys every architecture reads (hparams.cpp), and those it may carry but that do
// not change the graph (informational: context_length, vocab_size, ...).
const std::vector<std::string>& common_keys();
// The first `{arch}.` key of the file that the architecture does not read, or "" when none: a key
// ggflow does not know may change the model (experts, YaRN, ALiBi, ...), so it is refused rather
// than ignored.
std::string unknown_key(const gguf::File& file, const ArchTraits& arch);

struct HParams {
  ArchTraits arch;
  // feed_forward_length, head_count and head_count_kv are one number or (as llama.cpp reads them)
  // an array of one per layer: these are layer 0's values, ff(il) / heads(il) / kv_heads(il) each
  // layer's.
  int64_t n_layer = 0, n_embd = 0, n_ff = 0, n_head = 0, n_head_kv = 0;
  int64_t head_dim = 0;          // attention.key_length, default n_embd / n_head (full-attention layers)
  int64_t head_dim_swa = 0;      // attention.key_length_swa (gemma4): the sliding layers', default head_dim
  int64_t n_rot = 0;             // rope.dimension_count, default head_dim
  int64_t n_rot_swa = 0;         // rope.dimension_count_swa (gemma4), default n_rot
  int64_t n_layer_kv = 0;        // layers 0..n_layer_kv-1 own a KV cache; n_layer - attention.shared_kv_layers
  int64_t n_embd_per_layer = 0;  // embedding_length_per_layer_input (gemma4's per-layer inputs)
  int64_t n_ctx_train = 0;
  int64_t n_vocab = 0;           // rows of token_embd.weight
  int64_t n_swa = 0;             // attention.sliding_window; 0: no layer slides
  int64_t n_ctx_orig = 0;        // rope.scaling.original_context_length, default n_ctx_train
  float rms_eps = 1e-5f;
  float rope_base = 10000.0f;
  float rope_scale = 1.0f;       // 1 / rope.scaling.factor for linear scaling
  float rope_base_swa = 0.0f;    // the sliding layers' RoPE base
  float rope_scale_swa = 1.0f;   // and position scale (gemma3: unscaled; the others: rope_scale)
  float rope_attn_factor = 1.0f; // rope.scaling.attn_factor: multiplies cos and sin (phi3 LongRoPE)
  float attn_scale = 0.0f;       // Q scale when q_scale_in_graph (gemma: query_pre_attn_scalar ^ -0.5)
  float attn_softcap = 0.0f;     // attn_logit_softcapping (gemma2); 0: off
  float final_softcap = 0.0f;    // final_logit_softcapping (gemma2); 0: off
  std::vector<bool> swa_layers;  // per layer: sliding-window attention
  std::vector<int64_t> ff_l, heads_l, kv_heads_l;  // per layer (the arrays, or the one number n_layer times)

  int64_t ff(int64_t il) const { return ff_l[il]; }
  int64_t heads(int64_t il) const { return heads_l[il]; }
  int64_t kv_heads(int64_t il) const { return kv_heads_l[il]; }
  int64_t dim(int64_t il) const { return swa_layers[il] ? head_dim_swa : head_dim; }  // K and V head size
  int64_t rot(int64_t il) const { return swa_layers[il] ? n_rot_swa : n_rot; }
  bool has_kv(int64_t il) const { return il < n_layer_kv; }
  // The layer whose cache a layer without its own reads (gemma4's shared KV layers, llama.cpp's
  // reuse rule): the last sliding or the last full layer that has one; il itself when it has one.
  int64_t kv_source(int64_t il) const { return has_kv(il) ? il : n_layer_kv - (swa_layers[il] ? 2 : 1); }
  // K and V elements one token adds to the caches, over the layers that own one.
  int64_t kv_elems_per_token() const;
};

// Read and check the hyper-parameters. Errors: unsupported architecture (naming it and the
// supported ones), a missing or mistyped key, a count of 0 (layers, widths, heads, context), head
// counts that do not divide (embedding_length / head_count without key_length, head_count /
// head_count_kv), RoPE dimensions or scaling ggflow cannot apply (unknown/yarn/longrope types),
// block_count != the file's blk.N layers, a vocabulary (tokenizer.ggml.tokens, {arch}.vocab_size)
// or output head whose size differs from token_embd's rows; each error names the key or tensor.
Result<HParams> read_hparams(const gguf::File& file);

}  // namespace ggflow::builder
