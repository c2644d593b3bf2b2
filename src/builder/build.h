// The native .gguf graph builder: one generic dense-transformer builder (transformer.cpp) that
// turns a GGUF file into a GgmlGraph, with the per-architecture differences read from metadata
// (hparams.h) and the architecture table (arch.cpp). The graph follows llama.cpp's graphs for the same architectures op for op.
//
// The graph's inputs and outputs are a contract shared with the raw runner and the layout
// adaptation passes (DESIGN.md section 3). Shapes in GGML order (innermost first); T tokens of
// this step, KV = cache rows (past + T), O = rows that need logits:
//
//   inp_tokens          i32 [T]             token ids
//   inp_pos             i32 [T]             positions
//   inp_out_ids         i32 [O]             rows that need logits (llama.cpp's inp_out_ids)
//   self_kv_idxs        i64 [T]             cache row written by each token (llama.cpp's k_idxs/v_idxs)
//   self_kq_mask        f32 [KV, T]         additive causal mask (0 or -inf)
//   self_kq_mask_swa    f32 [KV, T]         the same with the sliding window (models with sliding layers)
//   cache_k_lN          f32 [n_embd_kv, KV] layer N's keys, rows 0..KV-1 (the runner owns them)
//   cache_v_lN          f32 [n_embd_kv, KV]
//   lora_scale_I        f32 [1, T]          adapter I's factor per token, 0 where unused (BuildOptions::loras; lora.h)
// outputs:
//   logits              f32 [n_vocab, O]
//   cache_k_lN_out      f32 [n_embd_kv, KV] the caches after SET_ROWS wrote this step's rows
//   cache_v_lN_out
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "builder/hparams.h"
#include "builder/lora.h"
#include "frontend/ggml_graph.h"
#include "gguf/file.h"

namespace ggflow::builder {

struct BuildOptions {
  bool flash_attn = true;   // FLASH_ATTN_EXT; false: MUL_MAT + SOFT_MAX + MUL_MAT as llama.cpp without -fa
  // The context the model will run with, where the graph depends on it: a phi3 LongRoPE file takes
  // its long factors beyond rope.scaling.original_context_length (as llama.cpp); 0: within it.
  int64_t n_ctx = 0;
  // The KV cache's element type: F32; F16 (half the memory; each K/V value rounded to nearest
  // even when written, as llama.cpp's default cache); or Q8_0 (each head's row as GGML q8_0 blocks,
  // as llama.cpp's -ctk/-ctv q8_0: 34 bytes per 32 values; the raw and SDPA layouts hold the same
  // values in f32, the paged layout the blocks). F16 and Q8_0 need flash_attn.
  gguf::GgmlType kv_type = gguf::GgmlType::F32;
  // LoRA adapters (open_lora against the same file), applied unmerged: adapter i's delta is
  // weighted per token by the input lora_scale_i.
  std::vector<std::shared_ptr<const LoraAdapter>> loras = {};
  // > 0: the LM head keeps its first logit_rows rows only (logits [logit_rows, T]; token ids
  // below it). A draft model's proposals need no more: BPE and SentencePiece vocabularies put the
  // frequent tokens first, and the head is a large share of a small model's bytes per token
  // (Qwen2.5 0.5B: 136 of 491 MB). 0 or >= the vocabulary: every row.
  int64_t logit_rows = 0;
  // Where set (Q4_0 only): every matrix but the LM head (output.weight, or token_embd where the
  // model ties them) whose rows are whole 32-value blocks is requantized at load to this type, the
  // bytes llama-quantize --type q4_0 writes (gguf/quantize.h). For a draft model, whose answers
  // only decide how many drafts the target accepts: Qwen2.5 0.5B Q4_K_M's Q5_0 / Q6_K / Q8_0
  // matrices are 5.5-8.5 bits per weight, Q4_0's 4.5, and a draft token reads them all.
  std::optional<gguf::GgmlType> requant = std::nullopt;
};

struct BuiltModel {
  HParams hp;
  frontend::GgmlGraph graph;
};

// Errors: unsupported architecture, a missing or unknown metadata key or tensor (named), a tensor
// whose shape does not fit the hyper-parameters, a tensor the architecture does not use.
Result<BuiltModel> build(const gguf::File& file, const BuildOptions& opt = {});

// An encoder (architecture "bert"; encoder.cpp): its hyper-parameters and its graph, whose
// output "embd" is the last layer's hidden states f32 [E, T] for inputs inp_tokens, inp_pos; a
// reranker's (pooling rank) also "score", its classification head on each sequence's first token.
enum class Pooling : int { none = 0, mean = 1, cls = 2, last = 3, rank = 4 };  // llama.cpp's pooling_type values
struct EncoderParams {
  int64_t n_embd = 0, n_layer = 0, n_head = 0, n_ff = 0, n_ctx_train = 0, n_vocab = 0, n_token_types = 0;
  float norm_eps = 1e-12f;
  Pooling pooling = Pooling::mean;
  int64_t n_cls_out = 0;  // a reranker's scores per sequence (the head's width; llama-server ranks by the first)
};
struct BuiltEncoder {
  EncoderParams params;
  frontend::GgmlGraph graph;
};
bool is_encoder(const gguf::File& file);
// Errors: not an encoder, missing or damaged metadata or tensors (named), an unsupported pooling.
Result<BuiltEncoder> build_encoder(const gguf::File& file);

// "f32", "f16" or "q8_0" (any case) as a KV cache type (BuildOptions::kv_type); else an error naming them.
Result<gguf::GgmlType> kv_type_from_name(std::string_view name);

// Names of the per-layer cache inputs and outputs.
std::string cache_k_name(int64_t layer);
std::string cache_v_name(int64_t layer);

}  // namespace ggflow::builder
