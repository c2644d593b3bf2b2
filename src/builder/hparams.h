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

// What distinguishes one dense-transformer architecture from another.
struct ArchTraits {
  std::string name;              // general.architecture
  bool qkv_bias = false;         // qwen2: attn_q/k/v.bias
  bool qk_norm = false;          // gemma3: RMS norms on each head of Q and K
  bool sandwich_norms = false;   // gemma3: post_attention_norm and post_ffw_norm
  bool embed_scale = false;      // gemma3: embeddings times sqrt(n_embd)
  bool q_scale_in_graph = false; // gemma3: Q *= f_attention_scale, attention scale 1
  bool rope_neox = false;        // qwen2, gemma3: rotate pairs (i, i + n_rot/2)
  FfnAct ffn_act = FfnAct::silu;
  int swa_pattern = 0;           // gemma3: 6 (every 6th layer global); 0 = no sliding window
  float rope_base_swa = 0.0f;    // gemma3: 10000 for the sliding-window layers
};

// The supported architectures; nullptr (and the list in `supported`) for any other.
const ArchTraits* find_arch(std::string_view name);
std::string supported_archs();   // "llama, qwen2, gemma3"

struct HParams {
  ArchTraits arch;
  int64_t n_layer = 0, n_embd = 0, n_ff = 0, n_head = 0, n_head_kv = 0;
  int64_t head_dim = 0;          // attention.key_length, default n_embd / n_head
  int64_t n_rot = 0;             // rope.dimension_count, default head_dim
  int64_t n_ctx_train = 0;
  int64_t n_vocab = 0;           // rows of token_embd.weight
  int64_t n_swa = 0;             // attention.sliding_window (gemma3)
  float rms_eps = 1e-5f;
  float rope_base = 10000.0f;
  float rope_scale = 1.0f;       // 1 / rope.scaling.factor for linear scaling
  float attn_scale = 0.0f;       // gemma3's Q scale (query_pre_attn_scalar ^ -0.5)
  std::vector<bool> swa_layers;  // per layer: sliding-window attention
  int64_t n_embd_kv() const { return n_head_kv * head_dim; }
};

// Read and check the hyper-parameters. Errors: unsupported architecture (naming it and the
// supported ones), a missing or mistyped key, a count of 0 (layers, widths, heads, context), head
// counts that do not divide (embedding_length / head_count without key_length, head_count /
// head_count_kv), RoPE dimensions or scaling ggflow cannot apply (unknown/yarn/longrope types),
// block_count != the file's blk.N layers, a vocabulary (tokenizer.ggml.tokens, {arch}.vocab_size)
// or output head whose size differs from token_embd's rows; each error names the key or tensor.
Result<HParams> read_hparams(const gguf::File& file);

}  // namespace ggflow::builder
